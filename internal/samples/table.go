package samples

import (
	"fmt"
	"strings"
)

// HTMLTable is a one-page HTML document: a heading, a table of rows rows
// ("row 1" … "row N") and some CSS — the page the benchmark and the pool
// tests print.
func HTMLTable(rows int) []byte {
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><title>Quarterly report</title><style>
body { font-family: "DejaVu Sans", sans-serif; margin: 2em; color: #222 }
h1 { font-size: 20pt; border-bottom: 2px solid #36c }
table { border-collapse: collapse; width: 100% }
th, td { border: 1px solid #999; padding: 3px 6px; font-size: 9pt }
tr:nth-child(even) td { background: #eef }
</style></head><body><h1>Quarterly report</h1><table><tr><th>Item</th><th>Units</th><th>Price</th></tr>`)
	for i := 1; i <= rows; i++ {
		fmt.Fprintf(&b, "<tr><td>row %d</td><td>%d</td><td>%d.%02d</td></tr>", i, i*7, i*3, i%100)
	}
	b.WriteString("</table></body></html>")
	return []byte(b.String())
}
