-- The Question tool asks the developer at the approval point (AG5): a question is an approval of
-- kind 'question', answered with text (`response`) or declined. Only an approved question carries a
-- response.
ALTER TABLE approvals DROP CONSTRAINT approvals_kind_check;
ALTER TABLE approvals ADD CONSTRAINT approvals_kind_check
  CHECK (kind IN ('command', 'write', 'changes', 'third_party', 'extension', 'question'));
ALTER TABLE approvals ADD COLUMN response text;
ALTER TABLE approvals ADD CONSTRAINT approvals_response_answers_a_question
  CHECK (response IS NULL OR (kind = 'question' AND state = 'approved'));
