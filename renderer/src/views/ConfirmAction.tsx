// A button for an action that cannot be undone: the first click asks, in place, with what will
// happen; the second (the confirm button, focused) does it. Escape or "Cancel" backs out.
import { useEffect, useRef, useState } from 'react';

export function ConfirmAction({ label, question, confirmLabel, action, disabled, title, danger, onConfirm }: {
  label: string;
  /** What will happen, in a sentence (shown next to the confirm button). */
  question: string;
  confirmLabel: string;
  /** data-action of the first button; the confirm button's is `confirm-${action}`. */
  action: string;
  disabled?: boolean;
  title?: string;
  danger?: boolean;
  onConfirm: () => void;
}) {
  const [asking, setAsking] = useState(false);
  const confirmRef = useRef<HTMLButtonElement>(null);
  const buttonRef = useRef<HTMLButtonElement>(null);
  const answered = useRef(false);
  useEffect(() => {
    if (asking) confirmRef.current?.focus();
    // Back from the question (either answer): the keyboard continues where it started.
    else if (answered.current) buttonRef.current?.focus();
  }, [asking]);
  const close = () => {
    answered.current = true;
    setAsking(false);
  };
  // The action may become impossible while the question is open (the VM stopped by itself).
  useEffect(() => { if (disabled) setAsking(false); }, [disabled]);
  if (!asking) {
    return (
      <button ref={buttonRef} type="button" className={`btn ${danger ? 'danger' : ''}`} data-action={action} disabled={disabled} title={title}
        onClick={() => setAsking(true)}>{label}</button>
    );
  }
  return (
    <span className="confirm" role="group" aria-label={question} data-confirm={action}
      onKeyDown={(e) => { if (e.key === 'Escape') close(); }}>
      <span>{question}</span>
      <button ref={confirmRef} type="button" className={`btn ${danger ? 'danger' : 'primary'}`} data-action={`confirm-${action}`}
        onClick={() => { close(); onConfirm(); }}>{confirmLabel}</button>
      <button type="button" className="btn" onClick={close}>Cancel</button>
    </span>
  );
}
