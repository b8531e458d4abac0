// What every step of the wizard (steps.tsx and the fields it shares, StorageFields.tsx and
// NetworkFields.tsx) is given by the wizard (Wizard.tsx): the draft, its problems, the service's
// description of it.
import type { HostInfo, ResolvedDto } from '../../../../electron/service/api.ts';
import type { Draft } from './draft.ts';
import type { FieldId } from './validate.ts';

export interface StepProps {
  draft: Draft;
  update: (patch: Partial<Draft>) => void;
  host: HostInfo | null;
  names: Set<string>;
  describe: DescribeResult;
  /** A field's problem, once it should be shown (the field was left, or Next was pressed). */
  problem: (field: FieldId) => string | undefined;
  /** The user left a field (blur), or changed one with no text to finish (a checkbox). */
  touch: (field: FieldId) => void;
  /** The user is typing in a field: its message waits for the blur. */
  editing: (field: FieldId) => void;
  /** Whether any field has a problem (the service's own check line then stays quiet). */
  anyProblem: boolean;
  /** Asks the service again about an unchanged configuration (a file it named was created meanwhile). */
  recheck: () => void;
}

export interface DescribeResult {
  resolved: ResolvedDto | null;
  error: string | null;
  pending: boolean;
}
