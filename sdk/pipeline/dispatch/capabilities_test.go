package dispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/fallback"
)

// A dispatcher whose routes need a capability its limiter or work lacks is
// refused when it is built, with the capability named, rather than run
// without it: a limiter without Confirm would spend slots a throttle had
// revoked, one without ReserveSharded would dead-letter every job of a
// sharded route.
func TestValidateRefusesAMissingCapability(t *testing.T) {
	tests := []struct {
		name  string
		needs Needs
		want  string // "" : accepted
	}{
		{"nothing needed", Needs{}, ""},
		{"adaptive bucket, no Confirm", Needs{Adaptive: true}, "cannot confirm a slot granted ahead (Confirm)"},
		{"sharded route, no ReserveSharded", Needs{Sharded: true}, "cannot reserve in shards (ReserveSharded)"},
		{"several buckets, no ReserveMulti", Needs{Multi: true}, "cannot reserve them together (ReserveMulti)"},
		{"items, no ReserveBatch", Needs{Items: true}, "further items (ReserveBatch)"},
		{"local share, no pacer", Needs{LocalShare: true}, "Dispatcher.LocalShare is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t) // its limiter can only reserve (and tell a known silence), its work only begin, hold and settle
			r.d.Needs = tt.needs
			err := r.d.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want an error saying %q", err, tt.want)
			}
		})
	}
	t.Run("every capability there", func(t *testing.T) {
		r := newRig(t)
		r.d.Needs = Needs{Sharded: true, Multi: true, Items: true, Adaptive: true, LocalShare: true}
		c := capable{}
		r.d.Can = Capabilities{Shards: c.ReserveSharded, Multi: c.ReserveMulti, Batch: c.ReserveBatch, Confirm: c.Confirm, KnownSilence: c.KnownSilence}
		r.d.LocalShare = fallback.New(1)
		if err := r.d.Validate(); err != nil {
			t.Fatalf("Validate = %v, want nil", err)
		}
	})
	t.Run("local share, no KnownSilence", func(t *testing.T) {
		r := newRig(t)
		r.d.Needs = Needs{LocalShare: true}
		r.d.Can = Capabilities{Confirm: capable{}.Confirm}
		r.d.LocalShare = fallback.New(1)
		if err := r.d.Validate(); err == nil || !strings.Contains(err.Error(), "(KnownSilence)") {
			t.Fatalf("Validate = %v, want an error naming KnownSilence", err)
		}
	})
}

// capable has every capability's method, and is never called.
type capable struct{}

func (capable) ReserveSharded(context.Context, limiter.ShardedBucket, int, time.Duration) (limiter.Reservation, error) {
	panic("not called")
}
func (capable) ReserveMulti(context.Context, []limiter.Bucket, int, time.Duration) (limiter.MultiReservation, error) {
	panic("not called")
}
func (capable) ReserveBatch(context.Context, limiter.Bucket, limiter.BatchRequest) (limiter.Batch, error) {
	panic("not called")
}
func (capable) Confirm(context.Context, limiter.Bucket, limiter.Stamp) (bool, error) {
	panic("not called")
}
func (capable) KnownSilence(limiter.Bucket) time.Time { panic("not called") }
