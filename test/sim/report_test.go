package sim

import (
	"math"
	"testing"
)

// TestCostPricesTheUnits checks the report's dollars against prices worked
// out by hand for a million changes.
func TestCostPricesTheUnits(t *testing.T) {
	r := &Report{SQSReqs: 1_000_000}
	r.Stats.Changes = 1_000_000
	r.Stats.Invocations = 10_000
	r.Stats.GBSeconds = 1_000
	r.DB.WCU, r.DB.RCU = 2_000_000, 4_000_000
	c := r.Cost()
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"DynamoDB on demand: 2 M WRU at $0.625/M + 4 M RRU at $0.125/M", c.DynamoDB, 1.75},
		{"SQS: 1 M requests at $0.40/M", c.SQS, 0.40},
		{"Lambda: 10,000 requests at $0.20/M + 1,000 GB-s at $0.0000133334", c.Lambda, 0.002 + 0.0133334},
		{"EventBridge: 1 M events at $1/M", c.EventBridge, 1},
		// 2 M WCU take 2e6/3600 WCU-hours at $0.00065, 4 M RCU 4e6/3600 at
		// $0.00013: $0.5056; bought at 70% use: $0.7222.
		{"DynamoDB provisioned at 70% use", c.DynamoDBProvisioned, (1300.0 + 520.0) / 3600 / 0.7},
		{"total leaves EventBridge out", c.Total(), 1.75 + 0.40 + 0.0153334},
	} {
		if math.Abs(tc.got-tc.want) > 1e-9 {
			t.Errorf("%s: $%.6f, want $%.6f", tc.name, tc.got, tc.want)
		}
	}
}
