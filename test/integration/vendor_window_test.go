package integration

import (
	"testing"

	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// assertVendorKeptItsWindow is the vendor-side check of a run against a
// mock OTA that enforces its limit with its own sliding-window log
// (mockota.EnforceWindow, package window: no code shared with sdk/gcra):
// the fleet sent nothing that window refused (no 429), and every window of
// what it sent to credential's endpoints, refused requests included, holds
// at most burst + rate·W. A check of the accepted times alone cannot fail:
// the vendor accepted only what fit.
func assertVendorKeptItsWindow(t *testing.T, ota *mockota.Server, credential string, endpoints ...string) {
	t.Helper()
	if n := ota.Count429(); n != 0 {
		t.Errorf("the vendor's own window refused %d requests with 429, want 0", n)
	}
	for _, ep := range endpoints {
		w, broken := ota.FullestWindowSent(credential, ep)
		if broken {
			t.Errorf("%s/%s: the fleet sent %v, over the vendor's limit", credential, ep, w)
		} else if w.Arrivals == 0 {
			t.Errorf("%s/%s: the vendor received nothing, so the check proves nothing", credential, ep)
		}
	}
}
