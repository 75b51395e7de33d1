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

// TestLimiterWritesCountTheLimiterTablesWrites: the limiter's writes are
// every call on its table but reads, whatever the call site.
func TestLimiterWritesCountTheLimiterTablesWrites(t *testing.T) {
	r := &Report{}
	r.DB.Sites = map[string]*Site{
		"limits UpdateItem limiter.(*Limiter).ReserveAhead ← dispatch.(*Dispatcher).reserveAhead":  {Calls: 10, Conditional: 3},
		"limits UpdateItem limiter.(*Limiter).ReserveBatch ← dispatch.(*Dispatcher).bookBatch":     {Calls: 4, Conditional: 1},
		"limits TransactWriteItems limiter.(*Limiter).TakeWithQuota ← dispatch.(*Dispatcher).take": {Calls: 2, Conditional: 2},
		"limits GetItem limiter.(*Limiter).Silence ← dispatch.(*Dispatcher).silenced":              {Calls: 7},
		"state UpdateItem lane.(*Store).Mark ← syncer.(*Syncer).markMapped":                        {Calls: 5, Conditional: 1},
		"connections Query connections.(*Cache).Targets ← syncer.(*Syncer).prepare":                {Calls: 9},
	}
	if w, f := r.LimiterWrites(); w != 16 || f != 6 {
		t.Errorf("limiter writes %d, failed %d; want 16 and 6 (10+4+2 writes, 3+1+2 failed; reads and other tables apart)", w, f)
	}
}
