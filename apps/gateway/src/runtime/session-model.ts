import { readFileSync } from 'node:fs';
import { pickModel, type AgentDefinition } from '@lemniscate/session';
import { parse as parseYaml } from 'yaml';
import { AppError, ErrorCode } from '../common/errors';
import type { GatewayConfig } from '../config/config';
import { ModelError, ModelsConfig, createModelProvider, type ModelProvider } from '../model';

/**
 * Which model a session runs with: the one its request names, the agent's when its file names one
 * the gateway serves, or the gateway's default. The model configuration file is read once, at the
 * first session.
 */
export class SessionModels {
  private config: ModelsConfig | undefined;

  constructor(private readonly settings: GatewayConfig['models']) {}

  async choose(requested: string | undefined, agent: AgentDefinition): Promise<{ provider: ModelProvider; warning: string | null }> {
    const config = this.load();
    const fallback = requested ?? this.settings.default;
    const picked = agent.model ? pickModel(agent, configuredModels(config), fallback ?? agent.model) : { model: fallback, warning: null };
    if (!picked.model) {
      throw new AppError(ErrorCode.ValidationFailed, 'model: no model is configured for this gateway; pass one (for example --model scripted:PATH) or set LEMNISCATE_DEFAULT_MODEL.');
    }
    try {
      return { provider: await createModelProvider(picked.model, config), warning: picked.warning };
    } catch (err) {
      if (err instanceof ModelError) throw new AppError(ErrorCode.ValidationFailed, `model: ${err.message}`);
      throw err;
    }
  }

  private load(): ModelsConfig {
    if (this.config) return this.config;
    const file = this.settings.configFile;
    let raw: unknown = {};
    if (file) {
      try {
        raw = parseYaml(readFileSync(file, 'utf8')) ?? {};
      } catch (err) {
        throw new AppError(ErrorCode.ValidationFailed, `The model configuration ${file} cannot be read: ${(err as Error).message}`);
      }
    }
    const parsed = ModelsConfig.safeParse(raw);
    if (!parsed.success) throw new AppError(ErrorCode.ValidationFailed, `The model configuration is invalid: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    this.config = parsed.data;
    return parsed.data;
  }
}

function configuredModels(config: ModelsConfig): string[] {
  const refs: string[] = [];
  if (config.openai) refs.push(`openai:${(config.openai as { model?: string }).model ?? ''}`);
  if (config.anthropic) refs.push(`anthropic:${(config.anthropic as { model?: string }).model ?? ''}`);
  for (const name of Object.keys(config.openaiCompatible)) refs.push(`openai-compatible:${name}`);
  return refs;
}
