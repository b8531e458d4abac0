// A chart's help line: two lines with an ellipsis, and a "more" button (only when there is more)
// that shows the whole text. A help cut mid-sentence with no sign of it read as the whole story.
import { useLayoutEffect, useRef, useState } from 'react';

export function ChartHelp({ text }: { text: string }) {
  const el = useRef<HTMLSpanElement>(null);
  const [expanded, setExpanded] = useState(false);
  const [cut, setCut] = useState(false);
  useLayoutEffect(() => {
    const t = el.current;
    if (!t || expanded) return;
    const check = () => setCut(t.scrollHeight > t.clientHeight + 1);
    check();
    const ro = new ResizeObserver(check);
    ro.observe(t);
    return () => ro.disconnect();
  }, [text, expanded]);
  return (
    <p className="chart-help" data-expanded={expanded}>
      <span className="chart-help-text" ref={el}>{text}</span>
      {(cut || expanded) && (
        <button type="button" className="chart-help-more" aria-expanded={expanded} onClick={() => setExpanded(!expanded)}>
          {expanded ? 'less' : 'more'}
        </button>
      )}
    </p>
  );
}
