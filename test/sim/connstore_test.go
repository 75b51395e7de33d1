package sim

import "testing"

// storedConnectionsRead checks that a run read its connections from the
// store, each environment a property's at most once a minute: some reads,
// and far fewer than the changes (two lookups each without the cache).
func storedConnectionsRead(t *testing.T, rep *Report) {
	t.Helper()
	reads, rcu := rep.ConnectionReads()
	if reads == 0 || rcu == 0 || 2*reads > rep.Stats.Changes {
		t.Errorf("%s read connections %d times (%.0f RCU) for %d changes, want some and at most one per two changes",
			rep.Scenario.Name, reads, rcu, rep.Stats.Changes)
	}
}
