// Where a property's changes go is asked of Connections: the connections
// store through its cache (sdk/pipeline/connections), or the file's
// "properties" for local runs and tests. A change to a code the target's
// connection does not map is dead-lettered for that lane before its
// lanes are marked, so no slot or request is spent on it; a lane whose
// connection was disabled or removed drops what it holds at its next push.

package syncer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// Connections answers where a property's changes go.
type Connections interface {
	// Targets lists the push destinations of a change of kind to the
	// property, with each connection's code mapping; false for a property
	// with no connections. An error means it cannot be told now.
	Targets(ctx context.Context, propertyID, kind string) ([]config.Target, bool, error)
	// CountUnmapped counts a change met with a code (field: format.
	// FieldRoomType or FieldRatePlan) the connection does not map.
	CountUnmapped(ctx context.Context, propertyID, channel, field, code string) error
}

// fileConnections are the connections file's properties.
type fileConnections struct{ c *config.Config }

func (f fileConnections) Targets(_ context.Context, propertyID, kind string) ([]config.Target, bool, error) {
	ts, ok := f.c.Targets(propertyID, kind)
	return ts, ok, nil
}

func (fileConnections) CountUnmapped(context.Context, string, string, string, string) error {
	return nil
}

func (s *Syncer) connections() Connections {
	if s.Connections != nil {
		return s.Connections
	}
	return fileConnections{s.Config}
}

// targetOf is the connection of lane id among the property's targets, if
// it still receives the lane's kind.
func (s *Syncer) targetOf(ctx context.Context, id lane.ID) (config.Target, bool, error) {
	ts, _, err := s.connections().Targets(ctx, id.Property, id.Kind)
	for _, t := range ts {
		if t.Channel == id.Channel && t.Credential == id.Credential && t.HotelRef == id.HotelRef {
			return t, true, err
		}
	}
	return config.Target{}, false, err
}

// deadLetterUnmapped dead-letters e for lane id, naming the code, the
// channel and the property, and counts the code.
func (s *Syncer) deadLetterUnmapped(ctx context.Context, id lane.ID, e lane.Element, err error) error {
	var un *format.UnmappedError
	if !errors.As(err, &un) {
		return err
	}
	un.Channel, un.Property = id.Channel, id.Property
	l := s.refusedLetter(id, e, un.Error())
	if err := s.Dispatcher.Queue.DeadLetter(ctx, l.Body, l.Reason); err != nil {
		return err
	}
	if err := s.connections().CountUnmapped(ctx, id.Property, id.Channel, un.Field, un.Code); err != nil {
		slog.Warn("unmapped code not counted", "property", id.Property, "channel", id.Channel, "code", un.Code, "err", err)
	}
	return nil
}

// deadLetterUnmappedIn dead-letters the elements of live holding the code
// un names (a mapping removed after they were marked).
func (s *Syncer) deadLetterUnmappedIn(ctx context.Context, id lane.ID, live []lane.Element, st pushed, un *format.UnmappedError) error {
	n := 0
	for _, e := range live {
		if un.Field == format.FieldRoomType && e.RoomType == un.Code || un.Field == format.FieldRatePlan && e.RatePlan == un.Code {
			if err := s.deadLetterUnmapped(ctx, id, st.held(e), un); err != nil {
				return err
			}
			st.settled.dead[e] = true
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("lane %s: %w (no pending change holds it)", id, un)
	}
	return nil
}

// dropDisconnected ends the push of a lane whose connection is disabled
// or gone: what the lane holds is dropped (counted, logged), not pushed
// and not dead-lettered, and the lane is released.
func (s *Syncer) dropDisconnected(ctx context.Context, id lane.ID, owner string, p lane.Pending) error {
	dropped := 0
	// Changes that landed meanwhile (a worker whose cache predates the
	// disable) go too: Finish hands back what it found pending.
	for range 3 {
		released, seen, err := s.Lanes.Finish(ctx, id, owner, p.Elements)
		if err != nil {
			return err
		}
		if released {
			dropped += len(p.Elements)
			break
		}
		p = seen
	}
	if err := s.Lanes.EndLease(ctx, id, owner, false); err != nil {
		var other *lane.NotOwnerError
		if !errors.As(err, &other) {
			return err
		}
	}
	s.dropped.Add(int64(dropped))
	slog.Info("connection disabled: pending changes dropped", "lane", id.String(), "dropped", dropped)
	return fmt.Errorf("%w: connection %s/%s disabled or removed: %d pending changes dropped", dispatch.ErrIdle, id.Property, id.Channel, dropped)
}

// Dropped counts the pending changes dropped from lanes whose connection
// was disabled or removed.
func (s *Syncer) Dropped() int64 { return s.dropped.Load() }

// unknownProperty is the reason a change to a property with no
// connections is dead-lettered.
func unknownProperty(propertyID string) string {
	return fmt.Sprintf("unknown property %q: no connections (fleetbucket connections put, or the connections file)", propertyID)
}
