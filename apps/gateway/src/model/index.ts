export * from './model.types';
export * from './model.errors';
export * from './model.config';
export { createModelProvider, parseModelRef, type ModelRef, type FactoryOptions } from './model.factory';
export { OpenAiCompatibleProvider, type OpenAiProviderSettings } from './openai.provider';
export { AnthropicProvider, type AnthropicProviderSettings } from './anthropic.provider';
export { ScriptedProvider, loadModelScript, parseModelScript, ModelScript, EXHAUSTED_TEXT, COMPACTION_TEXT } from './scripted.provider';
