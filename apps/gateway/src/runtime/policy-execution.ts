import { parse as parseYaml } from 'yaml';

/**
 * The `execution:` mapping as the administrator wrote it in a policy's source text. The parsed
 * policy fills every key with its default, and a default must not hide the developer's environment
 * or configuration (L5: defaults < environment < configuration < agent), so only written keys count.
 * Returns undefined when the policy has no `execution:` block (or no policy is published).
 */
export function writtenExecution(sourceText: string | undefined): unknown {
  if (sourceText === undefined) return undefined;
  const written: unknown = parseYaml(sourceText);
  if (!written || typeof written !== 'object' || Array.isArray(written)) return undefined;
  return (written as { execution?: unknown }).execution;
}
