package dispatch

import (
	"reflect"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// A holding is carried out the same wherever it was decided: a slot taken
// is when the job is due, so its linger (NotBefore) and its turn to ask
// (AskAt) are over with it; a slot dropped leaves both as they were, for
// the job's next booking to wait for; the zero holding changes nothing.
func TestHoldingTakesOrDropsTheSlot(t *testing.T) {
	t0 := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
	old, booked := job.Hold{At: t0, Tokens: 1}, job.Hold{At: t0.Add(time.Second), Key: "k#2", Ahead: true}
	before := job.Job{ID: "lane@tok", Hold: old, NotBefore: t0.Add(2 * time.Second), AskAt: t0.Add(300 * time.Millisecond)}
	tests := []struct {
		name string
		h    holding
		want job.Job
	}{
		{"nothing", holding{}, before},
		{"dropped", dropped, job.Job{ID: "lane@tok", NotBefore: before.NotBefore, AskAt: before.AskAt}},
		{"taken", taking(booked), job.Job{ID: "lane@tok", Hold: booked}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := before
			tt.h.apply(&j)
			if !reflect.DeepEqual(j, tt.want) {
				t.Fatalf("%+v after it; want %+v", j, tt.want)
			}
		})
	}
}
