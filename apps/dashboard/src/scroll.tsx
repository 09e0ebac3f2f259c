import type { ComponentChildren } from 'preact'

/**
 * A table that may scroll sideways (on a phone), or output that scrolls: it takes focus so a keyboard can scroll it
 * (axe's scrollable-region-focusable), and is a labelled region so a screen reader names it.
 */
export function ScrollRegion({
  label,
  class: className = 'table-wrap',
  children,
}: {
  label: string
  class?: string
  children: ComponentChildren
}) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must take focus to be scrolled by keyboard
    <section class={className} tabIndex={0} aria-label={label}>
      {children}
    </section>
  )
}
