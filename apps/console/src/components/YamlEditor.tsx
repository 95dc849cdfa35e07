import { useEffect, useRef } from 'react';
import { EditorView, basicSetup } from 'codemirror';
import { Annotation, EditorState } from '@codemirror/state';
import { yaml } from '@codemirror/lang-yaml';
import { linter, lintGutter, type Diagnostic } from '@codemirror/lint';
import type { PolicyDiagnostic } from '../policy/validate';

/** Marks changes that came from props, so they are not reported back as edits. */
const external = Annotation.define<boolean>();

interface YamlEditorProps {
  value: string;
  onChange: (text: string) => void;
  diagnose: (text: string) => PolicyDiagnostic[];
  labelId: string;
  describedBy?: string;
}

/**
 * CodeMirror 6 with YAML highlighting and the policy schema's errors underlined where they are.
 * Text set from outside (the form, a version loaded from history) replaces the document without
 * echoing back through onChange.
 */
export function YamlEditor({ value, onChange, diagnose, labelId, describedBy }: YamlEditorProps) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const latest = useRef({ onChange, diagnose });
  latest.current = { onChange, diagnose };

  useEffect(() => {
    if (!host.current) return;
    const policyLinter = linter(
      (v): Diagnostic[] =>
        latest.current.diagnose(v.state.doc.toString()).map((d) => ({
          from: Math.min(d.from, v.state.doc.length),
          to: Math.min(d.to, v.state.doc.length),
          severity: 'error',
          message: d.path ? `${d.path}: ${d.message}` : d.message,
        })),
      { delay: 250 },
    );
    const v = new EditorView({
      parent: host.current,
      state: EditorState.create({
        doc: value,
        extensions: [
          basicSetup,
          yaml(),
          lintGutter(),
          policyLinter,
          EditorView.contentAttributes.of({ 'aria-labelledby': labelId, ...(describedBy ? { 'aria-describedby': describedBy } : {}) }),
          EditorView.updateListener.of((u) => {
            if (u.docChanged && !u.transactions.some((t) => t.annotation(external))) latest.current.onChange(u.state.doc.toString());
          }),
        ],
      }),
    });
    view.current = v;
    return () => v.destroy();
    // Created once on purpose: later values arrive through the effect below.
  }, []);

  useEffect(() => {
    const v = view.current;
    if (!v || v.state.doc.toString() === value) return;
    v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: value }, annotations: external.of(true) });
  }, [value]);

  return <div className="yaml-editor" ref={host} />;
}
