package sim

import "testing"

// The smallest cases in which the adversary found two defects of the
// formats: a credential refused inside a 200 dead-lettered every pending
// change, and a vendor hanging past the lease was taken for the
// invocation ending.
func TestAdversaryPinnedFormats(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    Case
	}{
		// An OpenTravel vendor refusing the first credential's login
		// inside a 200 (EWT 4) for a span: the refusal was taken apart as
		// an item's and every change it carried dead-lettered as "refused
		// by the vendor" (format TestRefusalScope, dispatch
		// TestCredentialRefusalInsideA200KeepsEveryChange).
		{"a credential refused inside a 200", Case{Seed: 1, Parts: []string{"refuse-credential"}}},
		// A vendor silent for half an hour on a max_in_flight endpoint: the
		// push's lease context ended first and was read as the invocation
		// ending, so no failure was counted and the lane jobs went to the
		// DLQ by the queue's redrive, their days stale
		// (TestVendorHangPastTheLeaseIsAFailedPush).
		{"a vendor hanging past the lease", Case{Seed: 3, Parts: []string{"hang-lease"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if v := verdict(runCase(t, tt.c)); v != "" {
				t.Errorf("%s (replay: %s):\n%s", tt.name, tt.c.Replay(), v)
			}
		})
	}
}
