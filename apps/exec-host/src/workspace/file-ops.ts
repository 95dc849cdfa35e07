import { Limits, tooLargeMessage, type ApplyDiffResponse, type ListFilesResponse, type ProposedChange, type ReadFileResponse, type SearchFilesResponse } from '@lemniscate/contracts';
import { applyPatch, parsePatch } from 'diff';
import * as fs from 'node:fs';
import * as vm from 'node:vm';
import { ExecHostError } from '../errors';
import { displayPath } from './path-scope';
import { isBinary } from './safe-fs';
import { unifiedDiff } from './unified-diff';
import type { WorkingCopy } from './working-copy';

const FILE_LIMITS = {
  readMaxFileBytes: 10 * 1024 * 1024,
  readMaxAnswerBytes: 256 * 1024,
  listMaxEntries: 5_000,
  searchMaxFileBytes: 1024 * 1024,
  searchMaxFiles: 20_000,
  searchMaxBytes: 64 * 1024,
  searchMaxLineChars: 500,
  searchTimeMs: 5_000,
  writeMaxBytes: Limits.fileWriteBytes,
};

const SKIP_DIRS = new Set(['.git', 'node_modules']);

function gitMode(mode: number): string {
  return mode & 0o111 ? '100755' : '100644';
}

/** Read, List, Search and the write proposals of the file tools, over a WorkingCopy's safe file access. */
export class FileOperations {
  constructor(private readonly wc: WorkingCopy) {}

  read(requested: string, offset = 0, limit?: number): ReadFileResponse {
    const rel = this.wc.files.relative(requested);
    const { content, size } = this.wc.files.readFile(rel, FILE_LIMITS.readMaxFileBytes);
    if (isBinary(content)) throw new ExecHostError('binary_file', `${displayPath(rel)} is a binary file; it cannot be read as text.`);
    const text = content.toString('utf8');
    const lines = text.split('\n');
    if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
    const end = limit === undefined ? lines.length : Math.min(lines.length, offset + limit);
    let out = '';
    let taken = 0;
    let truncated = end < lines.length;
    for (let i = offset; i < end; i++) {
      const line = `${lines[i]}\n`;
      if (Buffer.byteLength(out) + Buffer.byteLength(line) > FILE_LIMITS.readMaxAnswerBytes) {
        truncated = true;
        break;
      }
      out += line;
      taken++;
    }
    return { path: rel, content: out, offset, lines: taken, totalLines: lines.length, size, truncated };
  }

  list(requested: string): ListFilesResponse {
    const rel = this.wc.files.relative(requested);
    const fd = this.wc.files.openRead(rel, true);
    try {
      const dir = `/proc/self/fd/${fd}`;
      const names = fs.readdirSync(dir).sort();
      const entries: ListFilesResponse['entries'] = [];
      for (const name of names.slice(0, FILE_LIMITS.listMaxEntries)) {
        let st: fs.Stats;
        try {
          st = fs.lstatSync(`${dir}/${name}`);
        } catch {
          continue;
        }
        const type = st.isSymbolicLink() ? 'symlink' : st.isDirectory() ? 'directory' : st.isFile() ? 'file' : 'other';
        entries.push({ name, type, size: type === 'file' ? st.size : 0 });
      }
      return { path: rel, entries, truncated: names.length > FILE_LIMITS.listMaxEntries };
    } finally {
      fs.closeSync(fd);
    }
  }

  /**
   * Bounded search: literal by default; a regular expression runs in a VM context with a time limit,
   * so a pathological pattern stops the search instead of the exec-host. Symbolic links are not
   * followed, binary and large files are skipped, .git and node_modules are not entered.
   */
  search(pattern: string, requested: string | undefined, regex: boolean, caseSensitive: boolean, maxMatches: number): SearchFilesResponse {
    let re: RegExp | null = null;
    if (regex) {
      try {
        re = new RegExp(pattern, caseSensitive ? '' : 'i');
      } catch (e) {
        throw new ExecHostError('invalid_pattern', `The search pattern is not a valid regular expression: ${(e as Error).message}.`);
      }
    }
    const needle = caseSensitive ? pattern : pattern.toLowerCase();
    const context = re ? vm.createContext({ re, lines: [] as string[], hits: [] as number[] }) : null;
    const rel = this.wc.files.relative(requested ?? '.');
    const result: SearchFilesResponse = { matches: [], filesScanned: 0, skippedBinary: 0, skippedLarge: 0, truncated: false, stoppedBy: null };
    const deadline = Date.now() + FILE_LIMITS.searchTimeMs;
    let bytes = 0;
    const stop = (why: NonNullable<SearchFilesResponse['stoppedBy']>) => {
      result.truncated = true;
      result.stoppedBy = why;
    };

    const searchText = (file: string, text: string): void => {
      const lines = text.split('\n');
      let hits: number[];
      if (re && context) {
        const left = deadline - Date.now();
        if (left <= 0) return stop('time_limit');
        context.lines = lines;
        try {
          hits = vm.runInContext('hits = []; for (let i = 0; i < lines.length; i++) if (re.test(lines[i])) hits.push(i); hits', context, { timeout: left }) as number[];
        } catch {
          return stop('time_limit');
        }
      } else {
        hits = [];
        lines.forEach((l, i) => {
          if ((caseSensitive ? l : l.toLowerCase()).includes(needle)) hits.push(i);
        });
      }
      for (const i of hits) {
        const line = (lines[i] ?? '').slice(0, FILE_LIMITS.searchMaxLineChars);
        bytes += Buffer.byteLength(line) + file.length + 16;
        if (bytes > FILE_LIMITS.searchMaxBytes) return stop('max_bytes');
        result.matches.push({ path: file, line: i + 1, text: line });
        if (result.matches.length >= maxMatches) return stop('max_matches');
      }
    };

    const visitFile = (fileRel: string, dirFd: number, name: string): void => {
      let fd: number;
      try {
        fd = fs.openSync(`/proc/self/fd/${dirFd}/${name}`, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
      } catch {
        return;
      }
      try {
        const st = fs.fstatSync(fd);
        if (!st.isFile()) return;
        if (st.size > FILE_LIMITS.searchMaxFileBytes) {
          result.skippedLarge++;
          return;
        }
        const content = fs.readFileSync(fd);
        result.filesScanned++;
        if (isBinary(content)) {
          result.skippedBinary++;
          return;
        }
        searchText(fileRel, content.toString('utf8'));
      } finally {
        fs.closeSync(fd);
      }
    };

    const walk = (dirRel: string, dirFd: number): void => {
      const names = fs.readdirSync(`/proc/self/fd/${dirFd}`, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1));
      for (const d of names) {
        if (result.stoppedBy) return;
        if (Date.now() > deadline) return stop('time_limit');
        if (result.filesScanned >= FILE_LIMITS.searchMaxFiles) return stop('max_files');
        const childRel = dirRel === '.' ? d.name : `${dirRel}/${d.name}`;
        if (d.isSymbolicLink()) continue;
        if (d.isDirectory()) {
          if (SKIP_DIRS.has(d.name)) continue;
          let child: number;
          try {
            child = fs.openSync(`/proc/self/fd/${dirFd}/${d.name}`, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_DIRECTORY);
          } catch {
            continue;
          }
          try {
            walk(childRel, child);
          } finally {
            fs.closeSync(child);
          }
        } else if (d.isFile()) {
          visitFile(childRel, dirFd, d.name);
        }
      }
    };

    const fd = this.wc.files.openRead(rel, false);
    try {
      const st = fs.fstatSync(fd);
      if (st.isDirectory()) walk(rel, fd);
      else if (st.isFile()) {
        const content = fs.readFileSync(`/proc/self/fd/${fd}`);
        result.filesScanned++;
        if (isBinary(content)) result.skippedBinary++;
        else searchText(rel, content.toString('utf8'));
      }
    } finally {
      fs.closeSync(fd);
    }
    return result;
  }

  proposeWrite(requested: string, content: string): ProposedChange {
    const rel = this.wc.files.relative(requested);
    const existing = this.existing(rel);
    if (existing && isBinary(existing.content)) {
      return { path: rel, diff: `diff --git a/${rel} b/${rel}\nBinary files a/${rel} and b/${rel} differ\n`, created: false, binary: true };
    }
    const mode = existing ? gitMode(existing.mode) : '100644';
    const before = existing ? { content: existing.content.toString('utf8'), mode } : null;
    const diff = unifiedDiff(rel, before, { content, mode });
    return { path: rel, diff, created: !existing, binary: content.includes('\0') };
  }

  proposeEdit(requested: string, oldString: string, newString: string): ProposedChange {
    const rel = this.wc.files.relative(requested);
    const existing = this.existing(rel);
    if (!existing) throw new ExecHostError('file_not_found', `${displayPath(rel)} does not exist; create it with a write instead.`);
    if (isBinary(existing.content)) throw new ExecHostError('binary_file', `${displayPath(rel)} is a binary file; it cannot be edited as text.`);
    const text = existing.content.toString('utf8');
    const first = text.indexOf(oldString);
    if (first < 0) throw new ExecHostError('edit_not_found', `The text to replace does not occur in ${displayPath(rel)}.`);
    if (text.indexOf(oldString, first + 1) >= 0) {
      const count = text.split(oldString).length - 1;
      throw new ExecHostError('edit_not_unique', `The text to replace occurs ${count} times in ${displayPath(rel)}; include more surrounding lines so it occurs exactly once.`);
    }
    const updated = text.slice(0, first) + newString + text.slice(first + oldString.length);
    const mode = gitMode(existing.mode);
    return { path: rel, diff: unifiedDiff(rel, { content: text, mode }, { content: updated, mode }), created: false, binary: false };
  }

  /**
   * Applies a diff a person approved: every file is checked first (in scope, still applies, no
   * unreviewed change under it), then all are written and staged into the checkpoint.
   */
  async apply(diffText: string): Promise<ApplyDiffResponse> {
    if (/^GIT binary patch$/m.test(diffText) || /^Binary files .* differ$/m.test(diffText)) {
      throw new ExecHostError('binary_file', 'The diff contains a binary change; only text diffs can be applied.');
    }
    let patches;
    try {
      patches = parsePatch(diffText);
    } catch (e) {
      throw new ExecHostError('invalid_request', `The diff could not be read: ${(e as Error).message}.`);
    }
    patches = patches.filter((p) => p.oldFileName || p.newFileName);
    if (patches.length === 0) throw new ExecHostError('invalid_request', 'The diff names no file.');
    const strip = (name: string | undefined) => (name && name !== '/dev/null' ? name.replace(/^[ab]\//, '') : null);
    const plans: { rel: string; next: string | null; mode: number }[] = [];
    for (const p of patches) {
      const oldName = strip(p.oldFileName);
      const newName = strip(p.newFileName);
      if (oldName && newName && oldName !== newName) throw new ExecHostError('invalid_request', `The diff renames ${oldName} to ${newName}; renames are applied as a deletion and a creation.`);
      const name = newName ?? oldName;
      if (!name) throw new ExecHostError('invalid_request', 'A file in the diff has no name.');
      const rel = this.wc.files.relative(name);
      const existing = this.existing(rel);
      if (!oldName && existing) throw new ExecHostError('patch_does_not_apply', `${displayPath(rel)} already exists, but the diff creates it.`);
      if (oldName && !existing) throw new ExecHostError('patch_does_not_apply', `${displayPath(rel)} no longer exists, so the diff does not apply.`);
      if (existing && isBinary(existing.content)) throw new ExecHostError('binary_file', `${displayPath(rel)} is a binary file; a text diff cannot change it.`);
      const current = existing ? existing.content.toString('utf8') : '';
      const next = applyPatch(current, p, { fuzzFactor: 0 });
      if (next === false) throw new ExecHostError('patch_does_not_apply', `The diff no longer applies to ${displayPath(rel)}: the file changed since it was proposed.`);
      if (Buffer.byteLength(next) > FILE_LIMITS.writeMaxBytes)
        throw new ExecHostError('file_too_large', `${displayPath(rel)} after the edit: ${tooLargeMessage('fileWriteBytes', Buffer.byteLength(next))}`);
      plans.push({ rel, next: newName ? next : null, mode: existing ? existing.mode & 0o777 : 0o644 });
    }
    const unreviewed = await this.wc.pending(plans.map((p) => p.rel));
    if (unreviewed.length > 0) {
      throw new ExecHostError(
        'unreviewed_changes',
        `${unreviewed.map(displayPath).join(', ')} ${unreviewed.length > 1 ? 'have' : 'has'} changes from a command that nobody has accepted or reverted yet; decide on those first.`,
      );
    }
    for (const plan of plans) {
      if (plan.next === null) this.wc.files.removeFile(plan.rel);
      else this.wc.files.writeFile(plan.rel, Buffer.from(plan.next, 'utf8'), plan.mode);
    }
    await this.wc.stageWritten(plans.map((p) => p.rel));
    return { applied: plans.map((p) => p.rel) };
  }

  private existing(rel: string): { content: Buffer; mode: number } | null {
    return this.wc.files.readFileIfExists(rel, FILE_LIMITS.writeMaxBytes);
  }
}
