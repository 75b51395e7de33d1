package integration

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// broughtSuite is a few of this package's tests that between them create
// every kind of resource the suites use (limiter and state tables, the
// pipeline's three queues) and fail one of their pushes on purpose.
var broughtSuite = []string{
	"TestCreateTableReportsAForeignTTL",
	"TestLaneMarkClaimClear",
	"TestReverseOrderEventsEndWithNewestAtTheOTA",
	"TestBadEventsAreDeadLetteredWithTheReason",
	"TestMonthSplitPush",
}

// The suites run against an endpoint the user brings (docs/operations.md):
// a few of them run in a child process (this test binary again) whose
// environment holds only a pair of private moto servers, started apart
// from the local stack, and a table prefix. They pass there, and leave no
// table or queue behind.
func TestSuitesAgainstABroughtEndpoint(t *testing.T) {
	if emulator.Brought() {
		t.Skip("already on a brought endpoint")
	}
	if testing.Short() {
		t.Skip("runs five integration tests in a child process")
	}
	dynamo, q := emulator.StartMoto(t), emulator.StartThreadedMoto(t) // as the local stack runs them
	cmd := exec.Command(os.Args[0], "-test.run=^("+strings.Join(broughtSuite, "|")+")$", "-test.count=1", "-test.v")
	cmd.Env = emulator.BroughtEnv(dynamo.Endpoint, q.Endpoint, "fbsuite")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the suite failed on the brought endpoint: %v\n%s", err, out)
	}
	for _, name := range broughtSuite {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass on the brought endpoint (skipped, or not run)", name)
		}
	}
	if left := emulator.Leftovers(t, dynamo.Endpoint, q.Endpoint); len(left) > 0 {
		t.Errorf("the suite left %d tables and queues on the brought endpoint, want none: %v", len(left), left)
	}
	if t.Failed() {
		t.Logf("the child's output:\n%s", out)
	}
}
