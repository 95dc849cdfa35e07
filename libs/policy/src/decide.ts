import { combine, type Decision } from './decision';
import type { Policy, ToolName } from './schema';
import { TOOL_NAMES } from './schema';
import { lexicalScope } from './scope';
import { analyseShell } from './shell/analyse';
import type { ShellAnalysis } from './shell/parts';
import { isPolicyEngineReady } from './shell/parser';
import { askedEveryTime, judgeCommand } from './commands';
import { LruCache } from './lru';
import { classifyPath, exclusionIndex, thirdPartyDecision } from './third-party';

export interface ToolCall {
  name: string;
  arguments: Record<string, unknown>;
}

/** A command a person approved "with its identical repeats" in this session (P3). */
export interface ApprovedCommand {
  /** The command exactly as it was proposed, character for character. */
  command: string;
  /** Where it ran: a repeat elsewhere is a different command. */
  workingDirectory: string;
  /** The approval that allowed it, named in every decision it allows again. */
  approvalId: string;
}

export interface DecisionContext {
  /** Commands a person approved with their identical repeats in this session. */
  approvedCommands?: readonly ApprovedCommand[];
  /** The directory a Bash command runs in (the working copy's root in the sandbox). */
  workingDirectory?: string;
  /** A read-only agent: only reading tools may run. */
  readOnly?: boolean;
  /** The agent's own tool list: anything else is outside its catalogue. */
  agentTools?: string[];
  /** The project root as the model sees it, to accept absolute paths inside it. */
  root?: string;
}

const READ_TOOLS = new Set<string>(['Read', 'List', 'Search', 'TaskResult', 'Question']);
const KNOWN_TOOLS = new Set<string>(TOOL_NAMES);

const CACHE_CAPACITY = 4096;
const CACHEABLE_LENGTH = 4096;
const analyses = new LruCache<string, ShellAnalysis>(CACHE_CAPACITY);

/** Shell analysis does not depend on the policy, so it is cached by command string alone. */
export function analyseCommand(command: string): ShellAnalysis {
  const hit = analyses.get(command);
  if (hit) return hit;
  const analysis = analyseShell(command);
  if (command.length <= CACHEABLE_LENGTH) analyses.set(command, analysis);
  return analysis;
}

function deny(rule: string, reason: string): Decision {
  return { effect: 'deny', rule, reason };
}

function stringArg(call: ToolCall, key: string): string | null {
  const v = call.arguments?.[key];
  return typeof v === 'string' ? v : null;
}

function missingArgument(tool: string, key: string): Decision {
  return deny('tools.arguments', `The ${tool} call has no \`${key}\` text, so there is nothing to judge (tools.arguments).`);
}

function decideBash(call: ToolCall, policy: Policy, context: DecisionContext): Decision {
  const command = stringArg(call, 'command');
  if (command === null) return missingArgument('Bash', 'command');
  if (!isPolicyEngineReady()) {
    throw new Error('The policy engine is not initialised: call `await initPolicyEngine()` once at start-up before deciding on shell commands.');
  }
  const findings: Decision[] = [];
  // P3: the first reason this command must be approved every time, if there is one.
  // A sensitive Bash tool needs approval for every use (tools.sensitive).
  let askedAgainBy: string | null = policy.tools.sensitive.includes('Bash') ? 'tools.sensitive' : null;
  const roots = [context.root, context.workingDirectory].filter((r): r is string => typeof r === 'string' && r.startsWith('/'));
  for (const part of analyseCommand(command).parts) {
    switch (part.kind) {
      case 'command': {
        const finding = judgeCommand(part, policy, roots);
        if (finding) findings.push(finding);
        askedAgainBy ??= askedEveryTime(part, policy);
        break;
      }
      case 'problem':
        findings.push({ effect: 'ask', rule: part.rule, reason: part.reason });
        break;
      case 'write': {
        const cls = part.target === null ? null : classifyPath(part.target, policy);
        if (cls && part.target !== null) findings.push(thirdPartyDecision([{ path: part.target, class: cls }], policy));
        else if (part.target === null) {
          // The same text may write somewhere else next time: asked every time (P3).
          askedAgainBy ??= 'shell.redirection';
          findings.push({
            effect: 'ask',
            rule: 'shell.redirection',
            reason: `The redirection \`${part.text}\` writes to a file only known when the command runs, so it needs approval (shell.redirection).`,
          });
        } else {
          findings.push({ effect: 'ask', rule: 'shell.redirection', reason: `The command writes to \`${part.target}\` through a redirection; a write needs approval (shell.redirection).` });
        }
        break;
      }
    }
  }
  const decision = combine(findings) ?? { effect: 'allow', rule: 'shell.empty', reason: 'The command runs no program (shell.empty).' };

  if (decision.effect === 'allow' && findings.length > 1) {
    const rules = findings.map((f) => f.rule).filter((r, i, all) => all.indexOf(r) === i);
    decision.reason = `Every part of the command is allowed by the project policy (${rules.join(', ')}).`;
  }
  if (decision.effect !== 'ask') return decision;
  // P3: an identical command a person already approved may run again, if the policy says so — and
  // only a command whose every doubt is an ordinary one: a program no rule names, or a write
  // redirected into an ordinary file (the change is still shown to a person after it runs). What the
  // same text may do differently next time (a program or wrapper only known at run time, a changed
  // environment, text the parser doubts), what may be forbidden, a third-party file and a rule of
  // commands.askEveryTime are asked every time.
  const ordinary = findings.every((f) => f.effect !== 'ask' || (!f.thirdParty && EXEMPTABLE_ASKS.has(f.rule)));
  const exempt = policy.commands.reapproval === 'exempt' && ordinary && askedAgainBy === null;
  if (!exempt) {
    // Say why "approve identical commands too" is not offered when a rule of the policy is the cause.
    if (policy.commands.reapproval === 'exempt' && askedAgainBy?.startsWith('commands.askEveryTime')) {
      return { ...decision, reason: `${decision.reason} The project policy asks for it every time, even when identical (${askedAgainBy}).` };
    }
    return decision;
  }
  const workingDirectory = context.workingDirectory ?? '';
  const earlier = context.approvedCommands?.find((a) => a.command === command && a.workingDirectory === workingDirectory);
  if (earlier) {
    return {
      effect: 'allow',
      rule: 'commands.reapproval',
      reason: `A person approved this exact command, in the same directory, with its identical repeats earlier in this session (approval ${earlier.approvalId}), and the project policy does not ask again for identical commands (commands.reapproval).`,
      approvalId: earlier.approvalId,
    };
  }
  return { ...decision, reapprovalExempt: true };
}

/** The only reasons to ask that an "approve identical commands" answer may cover (P3). */
const EXEMPTABLE_ASKS = new Set(['commands.default', 'shell.redirection']);

function decideFile(tool: 'Read' | 'List' | 'Search' | 'Write' | 'Edit', call: ToolCall, policy: Policy, context: DecisionContext): Decision {
  const raw = tool === 'Search' ? (call.arguments?.path ?? '.') : call.arguments?.path;
  if (typeof raw !== 'string' || raw.length === 0) return missingArgument(tool, 'path');
  if (tool === 'Search' && stringArg(call, 'pattern') === null) return missingArgument(tool, 'pattern');
  const scope = lexicalScope(raw, context.root);
  if (!scope.ok) return deny(scope.rule, scope.reason);
  const excluded = exclusionIndex(scope.relative, policy);

  if (tool === 'Read' || tool === 'List' || tool === 'Search') {
    if (excluded !== null && scope.relative !== '.') {
      const rule = `contextExclusions[${excluded}]`;
      return deny(rule, `\`${raw}\` is excluded from the model's context by the project policy (${rule}).`);
    }
    return { effect: 'allow', rule: 'tools.read', reason: `Reading inside the project is free (tools.read).` };
  }

  const content = tool === 'Write' ? stringArg(call, 'content') : stringArg(call, 'new_string');
  if (content === null) return missingArgument(tool, tool === 'Write' ? 'content' : 'new_string');
  if (tool === 'Edit' && stringArg(call, 'old_string') === null) return missingArgument(tool, 'old_string');
  if (excluded !== null) {
    const rule = `contextExclusions[${excluded}]`;
    return deny(rule, `\`${raw}\` is excluded from the model's context by the project policy, so it cannot be written either (${rule}).`);
  }
  let cls = classifyPath(scope.relative, policy);
  if (!cls && policy.thirdPartyFiles.binary && content.includes('\0')) cls = 'binary';
  if (!cls && Buffer.byteLength(content, 'utf8') > policy.thirdPartyFiles.maxDiffBytes) cls = 'oversize';
  if (cls) return thirdPartyDecision([{ path: scope.relative, class: cls }], policy);
  return {
    effect: 'ask',
    rule: 'tools.write',
    reason: `${tool === 'Write' ? 'A write' : 'An edit'} to \`${scope.relative}\` is shown to a person as a diff before it touches the working copy (tools.write).`,
  };
}

function decideTool(call: ToolCall, policy: Policy, context: DecisionContext): Decision {
  const name = call.name;
  if (!KNOWN_TOOLS.has(name)) {
    return deny('tools.unknown', `\`${name}\` is not a tool of the catalogue (${TOOL_NAMES.join(', ')}) (tools.unknown).`);
  }
  const tool = name as ToolName;
  if (Array.isArray(context.agentTools) && !context.agentTools.includes(tool)) {
    return deny('tools.agent', `The agent's tool list does not include ${tool}, so it cannot use it (tools.agent).`);
  }
  if (policy.tools.disabled.includes(tool)) {
    return deny('tools.disabled', `The project policy disables the ${tool} tool (tools.disabled).`);
  }
  if (context.readOnly && !READ_TOOLS.has(tool)) {
    return deny('context.readOnly', `This agent is read-only, and ${tool} ${tool === 'Bash' ? 'runs commands' : tool === 'Task' ? 'starts another agent' : 'changes files'} (context.readOnly).`);
  }

  let decision: Decision;
  switch (tool) {
    case 'Bash':
      decision = decideBash(call, policy, context);
      break;
    case 'Read':
    case 'List':
    case 'Search':
    case 'Write':
    case 'Edit':
      decision = decideFile(tool, call, policy, context);
      break;
    case 'Task':
      if (stringArg(call, 'instruction') === null) return missingArgument(tool, 'instruction');
      if (stringArg(call, 'agent') === null) return missingArgument(tool, 'agent');
      decision = { effect: 'allow', rule: 'tools.allowed', reason: 'The project policy lets the agent start a subagent (tools.allowed).' };
      break;
    case 'TaskResult':
      if (stringArg(call, 'task_id') === null) return missingArgument(tool, 'task_id');
      decision = { effect: 'allow', rule: 'tools.read', reason: 'Reading the result of a subagent is free (tools.read).' };
      break;
    case 'Question':
      if (stringArg(call, 'question') === null) return missingArgument(tool, 'question');
      decision = { effect: 'allow', rule: 'tools.allowed', reason: 'A question goes to the developer, who answers it (tools.allowed).' };
      break;
  }
  if (decision.effect === 'allow' && policy.tools.sensitive.includes(tool)) {
    return { effect: 'ask', rule: 'tools.sensitive', reason: `The project policy marks ${tool} as sensitive, so every use needs approval (tools.sensitive).` };
  }
  return decision;
}

/**
 * P8: decides one tool call against a project policy. Pure and synchronous once
 * `initPolicyEngine()` has resolved; throws only when a shell command arrives before that.
 */
export function decide(call: ToolCall, policy: Policy, context: DecisionContext = {}): Decision {
  if (call === null || typeof call !== 'object' || typeof call.name !== 'string') {
    return deny('tools.arguments', 'The tool call has no tool name (tools.arguments).');
  }
  if (call.arguments === null || typeof call.arguments !== 'object') {
    return deny('tools.arguments', `The ${call.name} call has no arguments object (tools.arguments).`);
  }
  return decideTool(call, policy, context ?? {});
}
