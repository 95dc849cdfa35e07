export * from './abilities';
export { decide, analyseCommand, type ToolCall, type DecisionContext, type ApprovedCommand } from './decide';
export type { Decision, ThirdPartyFile } from './decision';
export {
  parsePolicy,
  PolicyValidationError,
  policySchema,
  policyJsonSchema,
  defaultPolicy,
  recommendedPolicy,
  approvalTimeoutSeconds,
  DEFAULT_APPROVAL_TIMEOUT_SECONDS,
  TOOL_NAMES,
  EFFECTS,
  type Policy,
  type PolicyInput,
  type PolicyIssue,
  type ToolName,
  type Effect,
} from './schema';
export { checkPolicy, issueLine } from './check';
export { classifyChanges, classifyPath, type ChangeFacts } from './third-party';
export { resolveInScope, type ScopeFs, type ScopeResult } from './scope';
export { initPolicyEngine, isPolicyEngineReady } from './shell/parser';
export { runPolicyCommand, type PolicyCliIo } from './cli';
export {
  decideMcpCall,
  mcpCatalogue,
  mcpSchema,
  mcpToolName,
  mcpServerInScope,
  parseMcpToolName,
  MCP_TOOL_REFERENCE,
  type McpServer,
  withheld as mcpWithheld,
  MCP_PIN,
  type McpPolicy,
  type McpScope,
  type ListedTool,
} from './mcp';
