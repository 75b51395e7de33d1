package stack_test

import (
	"slices"
	"sort"
	"testing"

	"github.com/fleetbucket/fleetbucket/internal/contract"
)

// The synthesized stack and the function agree through internal/contract:
// the function reads exactly contract.FunctionEnv (functions/sync's
// TestSettingsReadExactlyTheContractsEnvironment), and the stack sets every
// variable the function requires and none it does not read; every metric an
// alarm or the dashboard watches in the function's namespace is one the
// function emits.
func TestStackAndFunctionAgree(t *testing.T) {
	f := getFixture(t)
	resources, _ := f.json["Resources"].(map[string]any)
	var env []string
	metrics := map[string]bool{}
	for _, r := range resources {
		res, _ := r.(map[string]any)
		props, _ := res["Properties"].(map[string]any)
		switch res["Type"] {
		case "AWS::Lambda::Function":
			vars, _ := props["Environment"].(map[string]any)["Variables"].(map[string]any)
			for k := range vars {
				env = append(env, k)
			}
		case "AWS::CloudWatch::Alarm", "AWS::CloudWatch::Dashboard":
			collectMetrics(props, metrics)
		}
	}
	sort.Strings(env)
	for _, want := range contract.RequiredEnv {
		if !slices.Contains(env, want) {
			t.Errorf("the function requires %s; the stack does not set it (sets %v)", want, env)
		}
	}
	for _, got := range env {
		if !slices.Contains(contract.FunctionEnv, got) {
			t.Errorf("the stack sets %s, which the function never reads (it reads %v)", got, contract.FunctionEnv)
		}
	}
	emitted := append(append([]string{}, contract.Counters...), contract.Millis...)
	if len(metrics) == 0 {
		t.Fatal("no metric of the function's namespace found in the alarms or the dashboard")
	}
	for m := range metrics {
		if !slices.Contains(emitted, m) {
			t.Errorf("an alarm or the dashboard watches metric %q, which the function never emits", m)
		}
	}
}

// collectMetrics gathers the MetricName of every metric in v (an alarm's
// properties, its metric-math Metrics, or a dashboard body's widget JSON as
// the template holds it: Fn::Join parts) whose namespace is the function's.
func collectMetrics(v any, into map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		if name, ok := x["MetricName"].(string); ok && x["Namespace"] == contract.MetricsNamespace {
			into[name] = true
		}
		for _, c := range x {
			collectMetrics(c, into)
		}
	case []any:
		// A dashboard widget's metric is an array: namespace, name, then options.
		for i := 0; i+1 < len(x); i++ {
			if ns, ok := x[i].(string); ok && ns == contract.MetricsNamespace {
				if name, ok := x[i+1].(string); ok {
					into[name] = true
				}
			}
		}
		for _, c := range x {
			collectMetrics(c, into)
		}
	}
}
