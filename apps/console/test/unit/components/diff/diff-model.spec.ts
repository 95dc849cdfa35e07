import { parseUnifiedDiff, toSplitRows } from '../../../../src/components/diff/diff-model';
import { splitHighlighted, languageFor } from '../../../../src/components/diff/highlight';

const patch = `diff --git a/src/sum.ts b/src/sum.ts
--- a/src/sum.ts
+++ b/src/sum.ts
@@ -1,4 +1,4 @@
 /* adds
    two numbers */
-export const sum = (a: number, b: number) => a - b;
+export const sum = (a: number, b: number) => a + b;
 export default sum;
--- /dev/null
+++ b/package.json
@@ -0,0 +1,3 @@
+{
+  "name": "x"
+}
`;

describe('parseUnifiedDiff', () => {
  const files = parseUnifiedDiff(patch);

  it('finds each file, its change and its counts', () => {
    expect(files.map((f) => [f.path, f.change, f.additions, f.deletions, f.language])).toEqual([
      ['src/sum.ts', 'modified', 1, 1, 'typescript'],
      ['package.json', 'added', 3, 0, 'json'],
    ]);
  });

  it('numbers old and new lines from the hunk header', () => {
    const lines = files[0]!.hunks[0]!.lines;
    expect(lines.map((l) => [l.kind, l.oldNo, l.newNo])).toEqual([
      ['context', 1, 1],
      ['context', 2, 2],
      ['del', 3, null],
      ['add', null, 3],
      ['context', 4, 4],
    ]);
  });

  it('keeps a multi-line comment coloured on both of its lines', () => {
    const [first, second] = files[0]!.hunks[0]!.lines;
    expect(first!.html).toContain('hljs-comment');
    expect(second!.html).toContain('hljs-comment');
    expect(second!.html.endsWith('</span>')).toBe(true);
  });

  it('escapes file content instead of interpreting it', () => {
    const [file] = parseUnifiedDiff('--- a/x.txt\n+++ b/x.txt\n@@ -1 +1 @@\n-a\n+<img src=x onerror=alert(1)>\n');
    expect(file!.hunks[0]!.lines[1]!.html).toBe('&lt;img src=x onerror=alert(1)&gt;');
  });

  it('marks binary files, which have no lines to show', () => {
    const [file] = parseUnifiedDiff('diff --git a/logo.png b/logo.png\nBinary files a/logo.png and b/logo.png differ\n');
    expect(file).toMatchObject({ path: 'logo.png', binary: true, hunks: [] });
  });

  it('reads two versions of one document as a change, not a rename, in the language asked for', () => {
    const [file] = parseUnifiedDiff('--- policy v2\n+++ policy v3\n@@ -1 +1 @@\n-default: ask\n+default: deny\n', { language: 'yaml', oneDocument: true });
    expect(file).toMatchObject({ change: 'modified', language: 'yaml' });
    expect(file!.hunks[0]!.lines[0]!.html).toContain('hljs-attr');
  });

  it('returns nothing for an empty patch', () => {
    expect(parseUnifiedDiff('')).toEqual([]);
  });
});

describe('toSplitRows', () => {
  it('pairs a deletion with the addition that replaces it', () => {
    const rows = toSplitRows(parseUnifiedDiff(patch)[0]!.hunks[0]!.lines);
    expect(rows).toHaveLength(4);
    expect(rows[2]!.left?.kind).toBe('del');
    expect(rows[2]!.right?.kind).toBe('add');
  });
});

describe('splitHighlighted', () => {
  it('closes and reopens spans across a line break', () => {
    expect(splitHighlighted('<span class="c">a\nb</span>c')).toEqual(['<span class="c">a</span>', '<span class="c">b</span>c']);
  });
  it('knows languages by file name as well as by extension', () => {
    expect(languageFor('build/Dockerfile')).toBe('dockerfile');
    expect(languageFor('README')).toBeNull();
  });
});
