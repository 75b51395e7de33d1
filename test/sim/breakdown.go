package sim

import (
	"fmt"
	"io"
	"sort"
)

// writeBreakdown is the cost by call site: every DynamoDB call by the SDK
// code path that made it (callSite), and every SQS request by queue and
// call, each per change and in dollars per million changes, largest first.
func (r *Report) writeBreakdown(w io.Writer) {
	ch := float64(r.Stats.Changes)
	m := 1e6 / max(ch, 1)
	type row struct {
		name    string
		dollars float64
		line    string
	}
	var rows []row
	for k, s := range r.DB.Sites {
		d := m * (s.WCU*Prices.WRU + s.RCU*Prices.RRU)
		rows = append(rows, row{k, d, fmt.Sprintf("%-100s %6.2f calls %6.2f WCU %6.2f RCU %5.2f cond. failed  $%6.3f",
			k, per(float64(s.Calls), ch), per(s.WCU, ch), per(s.RCU, ch), per(float64(s.Conditional), ch), d)})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].dollars != rows[j].dollars {
			return rows[i].dollars > rows[j].dollars
		}
		return rows[i].name < rows[j].name
	})
	fmt.Fprintf(w, "  DynamoDB by call site (store method ← its SDK caller), per change, and $ per million changes:\n")
	for _, rw := range rows {
		fmt.Fprintf(w, "    %s\n", rw.line)
	}
	rows = rows[:0]
	for k, n := range r.SQSByCall {
		d := m * float64(n) * Prices.SQS
		rows = append(rows, row{k, d, fmt.Sprintf("%-40s %6.3f requests  $%6.3f", k, per(float64(n), ch), d)})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].dollars != rows[j].dollars {
			return rows[i].dollars > rows[j].dollars
		}
		return rows[i].name < rows[j].name
	})
	fmt.Fprintf(w, "  SQS by queue and call, per change, and $ per million changes:\n")
	for _, rw := range rows {
		fmt.Fprintf(w, "    %s\n", rw.line)
	}
}
