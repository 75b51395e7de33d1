package stack_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/infra/stack"
)

// A parity check becomes a schedule on the default bus that invokes the
// function with its parity event; the sweep's schedule stays.
func TestParitySchedules(t *testing.T) {
	getFixture(t) // jsii is up
	j, findings := synthOne(t, "Parity", stack.Props{MaxConcurrency: 3, ParityChecks: []stack.ParityCheck{
		{Property: "hotel-aurora", Channel: "expedia", Every: 24 * time.Hour},
		{Property: "hotel-borealis", Channel: "expedia", Every: 6 * time.Hour, Days: 90},
	}})
	if len(findings) > 0 {
		t.Errorf("cdk-nag AwsSolutions findings:\n  %s", strings.Join(findings, "\n  "))
	}
	f := &fixture{json: j}
	inputs := map[string]string{}
	for _, r := range f.resources("AWS::Events::Rule") {
		p := r["Properties"].(obj)
		sched, _ := p["ScheduleExpression"].(string)
		for _, tg := range asList(p["Targets"]) {
			in, _ := tg.(obj)["Input"].(string)
			if strings.Contains(in, `"parity"`) {
				var ev map[string]any
				if err := json.Unmarshal([]byte(in), &ev); err != nil {
					t.Fatalf("rule input %q: %v", in, err)
				}
				inputs[sched] = mustJSON(ev)
			}
		}
	}
	want := map[string]string{
		"rate(1 day)":   `{"action":"parity","channel":"expedia","property":"hotel-aurora"}`,
		"rate(6 hours)": `{"action":"parity","channel":"expedia","days":90,"property":"hotel-borealis"}`,
	}
	if !jsonEqual(inputs, want) {
		t.Errorf("parity schedules %v, want %v", inputs, want)
	}
	if n := len(f.resources("AWS::Events::Rule")); n != 4 {
		t.Errorf("%d rules, want 4 (PMS changes, the sweep, two parity checks)", n)
	}
	cfnLint(t, j)
}
