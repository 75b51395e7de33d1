package benchkit

import "github.com/fleetbucket/fleetbucket/sdk/limiter"

// Metric is one number a benchmark reports (testing.B.ReportMetric takes
// exactly these two). Units name what is divided by what, so that a report
// can find them: "req/grant", "WCU/grant", "grants/allowed", …
type Metric struct {
	Value float64
	Unit  string
}

// FleetMetrics are the ratios of a fleet run on limit l, with u the DynamoDB
// usage metered over it:
//
//	req/grant        DynamoDB requests per granted token
//	WCU/grant        write capacity units billed per granted token
//	RCU/grant        read capacity units billed per granted token
//	grants/allowed   grants ÷ (burst + rate·T): utilization below 1, over-grant above
//	fullest-window   the fullest window's grants ÷ its bound (> 1: the limit was broken)
//	grants, allowed  the two counts themselves
//	cond-failed/grant  failed conditional writes per grant
//	reported-CU/grant  capacity the emulator itself reported per grant
//	max-item-bytes   the largest item seen (capacity assumes DynamoDB's rules)
//	fairness         the smallest worker share ÷ the largest
func FleetMetrics(r FleetResult, u Usage, l limiter.Limit) []Metric {
	g := float64(len(r.Grants))
	per := func(v float64) float64 {
		if g == 0 {
			return 0
		}
		return v / g
	}
	minShare, maxShare := -1, 0
	for _, n := range r.GrantsPerWorker {
		if minShare < 0 || n < minShare {
			minShare = n
		}
		maxShare = max(maxShare, n)
	}
	fair := 0.0
	if maxShare > 0 {
		fair = float64(minShare) / float64(maxShare)
	}
	return []Metric{
		{per(float64(u.Requests)), "req/grant"},
		{per(u.WCU), "WCU/grant"},
		{per(u.RCU), "RCU/grant"},
		{g / r.Allowed(l), "grants/allowed"},
		{r.OverBound(l), "fullest-window"},
		{g, "grants"},
		{r.Allowed(l), "allowed"},
		{per(float64(u.ConditionFailed)), "cond-failed/grant"},
		{per(u.Reported), "reported-CU/grant"},
		{float64(u.MaxItemBytes), "max-item-bytes"},
		{fair, "fairness"},
		{float64(r.Failures), "failures"},
		{0, "ns/op"}, // wall time is set by the bucket's rate, not by the code
	}
}
