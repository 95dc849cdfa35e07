import { readFile } from 'node:fs/promises';
import { Language, Parser } from 'web-tree-sitter';
import type { Node, Tree } from 'web-tree-sitter';

export type { Node as SyntaxNode };

let parser: Parser | null = null;
let initialising: Promise<void> | null = null;

/**
 * Loads the bash grammar (WebAssembly). Run once at start-up; later calls return the same promise,
 * so concurrent callers share one initialisation. After it resolves, `decide` is synchronous.
 */
export function initPolicyEngine(): Promise<void> {
  if (parser) return Promise.resolve();
  if (!initialising) {
    initialising = (async () => {
      await Parser.init();
      // Bytes, not a path: given a path, web-tree-sitter reads it through a dynamic import(),
      // which CommonJS test runners cannot follow.
      const wasm = await readFile(require.resolve('tree-sitter-bash/tree-sitter-bash.wasm'));
      const language = await Language.load(new Uint8Array(wasm));
      const p = new Parser();
      p.setLanguage(language);
      parser = p;
    })().catch((error: unknown) => {
      initialising = null;
      throw new Error(`The policy engine could not load its bash parser: ${error instanceof Error ? error.message : String(error)}`);
    });
  }
  return initialising;
}

export function isPolicyEngineReady(): boolean {
  return parser !== null;
}

/** Parses `source`, hands the tree to `use`, and frees the tree's WebAssembly memory afterwards. */
export function withSyntaxTree<T>(source: string, use: (root: Node) => T): T {
  if (!parser) {
    throw new Error('The policy engine is not initialised: call `await initPolicyEngine()` once at start-up before deciding on shell commands.');
  }
  const tree: Tree | null = parser.parse(source);
  if (!tree) throw new Error('The bash parser returned no tree.');
  try {
    return use(tree.rootNode);
  } finally {
    tree.delete();
  }
}
