import { useEffect, useRef, useState } from 'preact/hooks';

/**
 * A destructive action behind a second, explicit step: the button opens a small confirmation that
 * names what will happen; only its red button acts, Cancel (or Escape) leaves everything as it was.
 */
export function ConfirmButton({
  label,
  question,
  confirmLabel,
  onConfirm,
  testid,
  disabled,
}: {
  label: string;
  question: string;
  confirmLabel?: string;
  onConfirm: () => unknown;
  testid: string;
  disabled?: boolean;
}) {
  const [open, setOpen] = useState(false);
  const cancel = useRef<HTMLButtonElement>(null);
  // Focus lands on Cancel: Enter on an opened confirmation does nothing harmful.
  useEffect(() => {
    if (open) cancel.current?.focus();
  }, [open]);
  if (!open)
    return (
      <button type="button" class="danger-outline" data-testid={testid} disabled={disabled} onClick={() => setOpen(true)}>
        {label}
      </button>
    );
  return (
    <span class="confirm" role="alertdialog" aria-label={question} data-testid={`${testid}-confirm`} onKeyDown={(e) => e.key === 'Escape' && setOpen(false)}>
      <span class="question">{question}</span>
      <button type="button" class="secondary" data-testid={`${testid}-cancel`} ref={cancel} onClick={() => setOpen(false)}>
        Cancel
      </button>
      <button
        type="button"
        class="danger"
        data-testid={`${testid}-yes`}
        onClick={async () => {
          setOpen(false);
          await onConfirm();
        }}
      >
        {confirmLabel ?? label}
      </button>
    </span>
  );
}
