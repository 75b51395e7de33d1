package sim

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
)

// testSeed is the seed of the small runs; FLEETBUCKET_SIM_SEED overrides it
// to replay another.
func testSeed(t *testing.T) uint64 {
	if v := os.Getenv("FLEETBUCKET_SIM_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("FLEETBUCKET_SIM_SEED=%q: want an unsigned integer", v)
		}
		return n
	}
	return 1
}

// runChecked runs sc in a synctest bubble, logs its report and fails on
// any invariant it broke, printing the seed.
func runChecked(t *testing.T, sc Scenario, progress io.Writer) *Report {
	t.Helper()
	var rep *Report
	synctest.Test(t, func(t *testing.T) {
		r, err := Run(t.Context(), sc, progress)
		if err != nil {
			t.Fatalf("seed %d: %v", sc.Seed, err)
		}
		rep = r
	})
	var b strings.Builder
	rep.Write(&b)
	t.Log("\n" + b.String())
	if len(rep.Violations) > 0 {
		t.Errorf("scenario %s, seed %d (replay: FLEETBUCKET_SIM_SEED=%d): %d invariant violations:\n%s",
			sc.Name, sc.Seed, sc.Seed, len(rep.Violations), strings.Join(rep.Violations, "\n"))
	}
	return rep
}

// runScenario runs one scenario in a synctest bubble and fails on any
// invariant it broke, printing the seed.
func runScenario(t *testing.T, name string, size Size, seed uint64, progress io.Writer) *Report {
	t.Helper()
	sc, err := Named(name, size, seed)
	if err != nil {
		t.Fatal(err)
	}
	rep := runChecked(t, sc, progress)
	if rep.Stats.Changes == 0 || rep.Accepted == 0 {
		t.Errorf("scenario %s, seed %d: nothing happened (%d changes, %d accepted pushes)", name, seed, rep.Stats.Changes, rep.Accepted)
	}
	return rep
}

func TestSimCalibrate(t *testing.T) { runScenario(t, "calibrate", Small, testSeed(t), nil) }
func TestSimSteady(t *testing.T) {
	storedConnectionsRead(t, runScenario(t, "steady", Small, testSeed(t), nil))
}
func TestSimStorm(t *testing.T) { runScenario(t, "storm", Small, testSeed(t), nil) }
func TestSimSingleCredential(t *testing.T) {
	runScenario(t, "single-credential", Small, testSeed(t), nil)
}

// TestSimFaults also checks that every fault left its mark: a fault the
// fleet never felt tests nothing (the halved limit once sat far above
// the load and earned no 429).
func TestSimFaults(t *testing.T) {
	rep := runScenario(t, "faults", Small, testSeed(t), nil)
	for _, c := range []struct {
		fault string
		marks int
	}{
		{"DynamoDB outage: calls answered with an outage error", rep.DB.Failed},
		{"OTA 5xx: requests answered 5xx", rep.Failed},
		{"halved limit: 429s after the halving", rep.HalvedThrottles},
	} {
		if c.marks == 0 {
			t.Errorf("%s: none; the fault tested nothing", c.fault)
		}
	}
}

// TestSimFull is scripts/sim.sh's entry point: FLEETBUCKET_SIM names the
// scenario (full size) and FLEETBUCKET_SIM_OUT a directory for the report
// and its chart.
func TestSimFull(t *testing.T) {
	name := os.Getenv("FLEETBUCKET_SIM")
	if name == "" {
		t.Skip("set FLEETBUCKET_SIM=<scenario> (scripts/sim.sh does)")
	}
	size := Full
	if os.Getenv("FLEETBUCKET_SIM_SMALL") != "" {
		size = Small
	}
	defer profileCPU()()
	rep := runScenario(t, name, size, testSeed(t), os.Stderr)
	if out := os.Getenv("FLEETBUCKET_SIM_OUT"); out != "" {
		var b strings.Builder
		rep.Write(&b)
		if err := os.WriteFile(filepath.Join(out, "sim-"+name+".txt"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, "sim-"+name+".svg"), []byte(rep.SVG()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSimOnboarding: the resync's hotels all reach every OTA beside the
// live load, under the same invariants.
func TestSimOnboarding(t *testing.T) {
	rep := runScenario(t, "onboarding", Small, testSeed(t), nil)
	o := rep.Scenario.Onboard
	want := o.Properties * o.Days * o.Rooms * o.Plans * 3 * len(rep.Scenario.Channels)
	// A live change to a stored day makes it live, so fewer may arrive
	// as the resync's; none stale at the end is the invariants' check.
	if got := rep.OnboardFresh.N(); got < want*9/10 || got > want {
		t.Errorf("onboarding: %d (day, channel) deliveries of the hotels' stored state, want about %d", got, want)
	}
}
