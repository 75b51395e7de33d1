package stack

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/jsii-runtime-go"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/parity"
)

// ParityCheck is a parity check the stack runs on a schedule: an
// EventBridge rule invokes the function with a parity event for one
// connection (parity.Event), which reads the OTA's copy through the
// channel's read bucket and repairs the drift.
type ParityCheck struct {
	Property, Channel string
	// Every is the schedule's period: whole minutes, at least an hour (a
	// check of a year reads the OTA a dozen times).
	Every time.Duration
	// Days is the window from the day of the run; 0: parity.DefaultDays.
	Days int
}

// MaxParityChecks bounds Props.ParityChecks: one rule each, and an
// account holds 300 rules per bus by default.
const MaxParityChecks = 100

func validateParity(checks []ParityCheck) error {
	if len(checks) > MaxParityChecks {
		return fmt.Errorf("stack: %d ParityChecks, at most %d (one EventBridge rule each)", len(checks), MaxParityChecks)
	}
	for i, c := range checks {
		switch {
		case c.Property == "" || c.Channel == "":
			return fmt.Errorf("stack: ParityChecks[%d]: property and channel are required", i)
		case c.Every < time.Hour || c.Every%time.Minute != 0:
			return fmt.Errorf("stack: ParityChecks[%d] (%s/%s): every %v, want whole minutes, at least 1h", i, c.Property, c.Channel, c.Every)
		case c.Days < 0 || c.Days > 730:
			return fmt.Errorf("stack: ParityChecks[%d] (%s/%s): days %d, want 0 (a year) to 730", i, c.Property, c.Channel, c.Days)
		}
	}
	return nil
}

// addParitySchedules adds a rule per parity check, on the default bus (as
// the sweep's schedule).
func (s *SyncStack) addParitySchedules(stack awscdk.Stack, checks []ParityCheck) {
	for i, c := range checks {
		ev := map[string]interface{}{"action": parity.Action, "property": c.Property, "channel": c.Channel}
		if c.Days > 0 {
			ev["days"] = c.Days
		}
		s.ParityRules = append(s.ParityRules, awsevents.NewRule(stack, jsii.String(fmt.Sprintf("ParitySchedule%d", i)), &awsevents.RuleProps{
			Description: jsii.String(fmt.Sprintf("Every %v: check what %s holds of %s and repair the drift (fleetbucket parity)", c.Every, c.Channel, c.Property)),
			Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(c.Every.Minutes()))),
			Targets: &[]awsevents.IRuleTarget{
				awseventstargets.NewLambdaFunction(s.Function, &awseventstargets.LambdaFunctionProps{
					Event: awsevents.RuleTargetInput_FromObject(ev),
				}),
			},
		}))
	}
}
