package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/infra/stack"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
)

// contextParity is the CDK context key of the scheduled parity checks: a
// JSON array (in cdk.json, or a string with -c) of
// {"property", "channel", "every" (a Go duration, ≥ 1h), "days"}.
const contextParity = "parityChecks"

// paritySetting reads the parity checks from raw (the context's value; nil
// for none) and checks each channel against the deployed config: it must
// have a "read" endpoint its format can read with.
func paritySetting(raw any, cfg *config.Config) ([]stack.ParityCheck, error) {
	if raw == nil {
		return nil, nil
	}
	b, ok := raw.(string)
	if !ok {
		j, err := json.Marshal(raw)
		if err != nil {
			return nil, fmt.Errorf("context %s: %w", contextParity, err)
		}
		b = string(j)
	}
	var in []struct {
		Property string `json:"property"`
		Channel  string `json:"channel"`
		Every    string `json:"every"`
		Days     int    `json:"days"`
	}
	if err := json.Unmarshal([]byte(b), &in); err != nil {
		return nil, fmt.Errorf(`context %s: want [{"property": …, "channel": …, "every": "24h", "days": 365}]: %v`, contextParity, err)
	}
	out := make([]stack.ParityCheck, len(in))
	for i, c := range in {
		every, err := time.ParseDuration(c.Every)
		if err != nil {
			return nil, fmt.Errorf("context %s[%d].every: %q is not a duration (\"24h\")", contextParity, i, c.Every)
		}
		if _, err := cfg.ReadOf(c.Channel); err != nil {
			return nil, fmt.Errorf("context %s[%d]: %w", contextParity, i, err)
		}
		out[i] = stack.ParityCheck{Property: c.Property, Channel: c.Channel, Every: every, Days: c.Days}
	}
	return out, nil
}
