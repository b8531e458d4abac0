// A button for an action that cannot be undone: the first click asks, in a modal dialog, with
// what will happen; the dialog's confirm button (focused) does it. The keyboard stays in the
// dialog while it is open (Tab and Shift+Tab go round its buttons; the page behind is inert);
// Escape or Cancel backs out; either answer puts the focus back on the button that asked.
import { useEffect, useId, useRef, useState } from 'react';

export function ConfirmAction({ label, question, confirmLabel, cancelLabel = 'Cancel', action, disabled, title, danger, small, ariaLabel, onConfirm, children }: {
  label: string;
  /** What will happen, in a sentence (the dialog's text and its accessible name). */
  question: string;
  confirmLabel: string;
  cancelLabel?: string;
  /** data-action of the first button; the confirm button's is `confirm-${action}`, the dialog's data-confirm is `action`. */
  action: string;
  disabled?: boolean;
  title?: string;
  danger?: boolean;
  small?: boolean;
  /** The first button's accessible name, when its label alone does not say what it acts on. */
  ariaLabel?: string;
  onConfirm: () => void;
  /** More of the question: a choice that goes with the answer (a checkbox), under the sentence. */
  children?: React.ReactNode;
}) {
  const id = useId();
  const [asking, setAsking] = useState(false);
  const dialogRef = useRef<HTMLDialogElement>(null);
  const confirmRef = useRef<HTMLButtonElement>(null);
  const buttonRef = useRef<HTMLButtonElement>(null);
  const answered = useRef(false);
  useEffect(() => {
    const d = dialogRef.current;
    if (asking && d) {
      if (!d.open) d.showModal();
      confirmRef.current?.focus();
    } else if (!asking && answered.current) {
      // Back from the question (either answer): the keyboard continues where it started.
      answered.current = false;
      buttonRef.current?.focus();
    }
  }, [asking]);
  const close = () => {
    answered.current = true;
    if (dialogRef.current?.open) dialogRef.current.close();
    setAsking(false);
  };
  // The action may become impossible while the question is open (the VM stopped by itself).
  useEffect(() => { if (disabled && asking) close(); }, [disabled]);
  const onKeyDown = (e: React.KeyboardEvent<HTMLDialogElement>) => {
    if (e.key === 'Escape') {
      // Handled here rather than by the browser's own cancel, which it may skip (close watchers).
      e.preventDefault();
      e.stopPropagation();
      close();
    } else if (e.key === 'Tab') {
      const items = [...e.currentTarget.querySelectorAll<HTMLElement>('button:not(:disabled), input:not(:disabled)')];
      const first = items[0];
      const last = items[items.length - 1];
      if (!first || !last) return;
      const at = document.activeElement;
      const inside = at instanceof HTMLElement && e.currentTarget.contains(at);
      if (e.shiftKey && (at === first || !inside)) {
        e.preventDefault();
        last.focus();
      } else if (!e.shiftKey && (at === last || !inside)) {
        e.preventDefault();
        first.focus();
      }
    }
  };
  return (
    <>
      <button ref={buttonRef} type="button" className={`btn ${small ? 'small' : ''} ${danger ? 'danger' : ''}`} data-action={action}
        disabled={disabled} title={title} aria-label={ariaLabel} aria-haspopup="dialog" onClick={() => setAsking(true)}>{label}</button>
      {asking && (
        <dialog ref={dialogRef} className="confirm-dialog" data-confirm={action} aria-labelledby={`${id}-q`} onKeyDown={onKeyDown}
          onCancel={(e) => { e.preventDefault(); close(); }} onClose={() => { if (asking) close(); }}>
          <p id={`${id}-q`}>{question}</p>
          {children}
          <div className="confirm-actions">
            <button ref={confirmRef} type="button" className={`btn ${danger ? 'danger' : 'primary'}`} data-action={`confirm-${action}`}
              onClick={() => { close(); onConfirm(); }}>{confirmLabel}</button>
            <button type="button" className="btn" onClick={close}>{cancelLabel}</button>
          </div>
        </dialog>
      )}
    </>
  );
}
