package main

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/internal/contract"
)

// The function reads exactly the variables internal/contract names (the
// stack's TestStackAndFunctionAgree checks the template against the same
// list), and refuses to start without each required one.
func TestSettingsReadExactlyTheContractsEnvironment(t *testing.T) {
	var read []string
	env := map[string]string{}
	for _, k := range contract.RequiredEnv {
		env[k] = "set"
	}
	env[contract.EnvMaxReceiveCount] = "5"

	getenv := func(k string) string {
		if strings.HasPrefix(k, "FLEETBUCKET_") && !slices.Contains(read, k) {
			read = append(read, k)
		}
		return env[k]
	}
	if _, err := readSettings(getenv); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(contract.FunctionEnv)
	sort.Strings(read)
	sort.Strings(want)
	if !slices.Equal(read, want) {
		t.Errorf("the function reads %v, the contract names %v", read, want)
	}
	for _, k := range contract.RequiredEnv {
		without := map[string]string{}
		for kk, v := range env {
			if kk != k {
				without[kk] = v
			}
		}
		if _, err := readSettings(func(n string) string { return without[n] }); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("without %s: %v, want an error naming it", k, err)
		}
	}
}
