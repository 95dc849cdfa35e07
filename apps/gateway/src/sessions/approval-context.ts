import { applyPatch, parsePatch, reversePatch, type StructuredPatch } from 'diff';

/** A file's part of a change, found by the path a reviewer sees. */
export function filePatchOf(diff: string, path: string): StructuredPatch | null {
  const strip = (name: string | undefined) => (!name || name === '/dev/null' ? null : name.replace(/^[ab]\//, '').replace(/\t.*$/, ''));
  for (const p of parsePatch(diff)) {
    const newPath = strip(p.newFileName);
    const oldPath = strip(p.oldFileName);
    if ((newPath ?? oldPath) === path) return p;
  }
  return null;
}

/** How a file's part of a change treats the file: context exists only around a modification. */
export function changeOf(patch: StructuredPatch): 'added' | 'deleted' | 'modified' {
  if (!patch.oldFileName || patch.oldFileName === '/dev/null') return 'added';
  if (!patch.newFileName || patch.newFileName === '/dev/null') return 'deleted';
  return 'modified';
}

/**
 * The file as it was before the change, from the working copy's text, which holds either side: the
 * old one while a write waits for its approval, the new one after a command changed the file. Each
 * reading is checked by applying the change exactly (no fuzz); the side the request's kind expects
 * is tried first. Null when neither fits: the file moved on since the change was proposed.
 *
 * The exec-host's read ends every line with a newline; a file without one at its end is tried both ways.
 */
export function oldSideOf(patch: StructuredPatch, workingCopy: string, expected: 'old' | 'new'): string | null {
  const texts = workingCopy.endsWith('\n') ? [workingCopy, workingCopy.slice(0, -1)] : [workingCopy];
  const asOld = (text: string) => (applyPatch(text, patch) === false ? null : text);
  const asNew = (text: string) => {
    const old = applyPatch(text, reversePatch(patch));
    return old === false ? null : old;
  };
  const order = expected === 'old' ? [asOld, asNew] : [asNew, asOld];
  for (const read of order) {
    for (const text of texts) {
      const old = read(text);
      if (old !== null) return old;
    }
  }
  return null;
}

/** A text's lines without their ends (a final newline does not make an empty last line). */
export function linesOf(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}
