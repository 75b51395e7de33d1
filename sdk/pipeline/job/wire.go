package job

import (
	"encoding/json"
	"time"
)

// wireJob is a Job as its message body spells it. The hold is written
// flat, under the names its fields had before they became one value, so
// that messages in flight across a deployment read the same either way.
// The stamp's names are those of the probing slots that first carried it.
type wireJob struct {
	body
	Slot          time.Time `json:"slot,omitzero"`
	SlotKey       string    `json:"slot_key,omitempty"`
	Tokens        int       `json:"tokens,omitempty"`
	GrantVersion  int64     `json:"probe_version,omitempty"`
	GrantInterval int64     `json:"probe_interval_us,omitempty"`
}

// body is Job without its methods, so that wireJob's encoding does not
// call back into Job's.
type body Job

func toWire(j Job) wireJob {
	return wireJob{body: body(j), Slot: j.Hold.At, SlotKey: j.Hold.Key, Tokens: j.Hold.Tokens,
		GrantVersion: j.Hold.Grant.Version, GrantInterval: j.Hold.Grant.Interval}
}

func (w wireJob) job() Job {
	j := Job(w.body)
	j.Hold = Hold{At: w.Slot, Key: w.SlotKey, Tokens: w.Tokens, Grant: Grant{Version: w.GrantVersion, Interval: w.GrantInterval}, Ahead: !w.Slot.IsZero()}
	return j
}

// MarshalJSON writes j in its wire form (see wireJob).
func (j Job) MarshalJSON() ([]byte, error) { return json.Marshal(toWire(j)) }

// UnmarshalJSON reads j's wire form, passing over fields it does not know
// (Decode says why); Decode also checks the version and the fields.
func (j *Job) UnmarshalJSON(b []byte) error {
	var w wireJob
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*j = w.job()
	return nil
}
