// The dashboard's one table: a labelled region that scrolls sideways, a header row, a row per item.
import type { ComponentChildren } from 'preact'
import { ScrollRegion } from './scroll.tsx'

export interface Column<Row> {
  header: string
  /** The header is for screen readers only (an actions column). */
  headerHidden?: boolean
  cell: (row: Row) => ComponentChildren
  /** On the header and the cells (`wide` hides the column on a phone). */
  class?: string
  /** On the cells only, after `class`. */
  cellClass?: string
  /** Stays in view at the row's end while the rest scrolls sideways under it (a row's actions). */
  sticky?: boolean
}

export interface DataTableProps<Row> {
  /** Names the scrolling region for a screen reader. */
  label: string
  columns: Column<Row>[]
  rows: readonly Row[]
  rowKey: (row: Row) => string | number
  /** `data-*` attributes of a row, for the page's tests and scripts to find it by. */
  rowData?: (row: Row) => Record<`data-${string}`, string>
  /** Shown instead of the table when there are no rows; without it an empty table shows. */
  empty?: string
  /** Rows that arrive live are announced. */
  live?: boolean
  /** On a phone each row is a card (its cells wrap in the row's width) instead of a line to scroll along. */
  cards?: boolean
}

function classOf(...names: (string | false | undefined)[]): string | undefined {
  return names.filter(Boolean).join(' ') || undefined
}

export function DataTable<Row>({ label, columns, rows, rowKey, rowData, empty, live, cards }: DataTableProps<Row>) {
  if (empty !== undefined && rows.length === 0) return <p>{empty}</p>
  return (
    <ScrollRegion label={label}>
      <table class={cards ? 'cards' : undefined}>
        <thead>
          <tr>
            {columns.map((c) => (
              <th key={c.header} scope="col" class={classOf(c.class, c.sticky && 'sticky-end')}>
                {c.headerHidden ? <span class="visually-hidden">{c.header}</span> : c.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody aria-live={live ? 'polite' : undefined}>
          {rows.map((row) => (
            <tr key={rowKey(row)} {...rowData?.(row)}>
              {columns.map((c) => (
                <td key={c.header} class={classOf(c.class, c.cellClass, c.sticky && 'sticky-end')}>
                  {c.cell(row)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </ScrollRegion>
  )
}
