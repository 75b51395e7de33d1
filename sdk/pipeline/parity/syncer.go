package parity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
)

// SyncerRepairer repairs in the running invocation: the repair changes go
// through Syncer as a batch from the changes queue would, so they mark
// their lanes by the same path, and the pushes they wake are dispatched at
// once (the function's parity event; the simulation's parity runs).
type SyncerRepairer struct{ Syncer *syncer.Syncer }

func (r SyncerRepairer) Repair(ctx context.Context, changes []ari.Change) error {
	msgs := make([]syncer.Message, len(changes))
	for i, c := range changes {
		body, err := Envelope(c, time.Now())
		if err != nil {
			return err
		}
		msgs[i] = syncer.Message{ID: c.EventID, Body: body}
	}
	var errs []error
	for _, out := range r.Syncer.HandleBatch(ctx, msgs) {
		switch {
		case out.Err != nil:
			errs = append(errs, fmt.Errorf("repair %s: %w", out.ID, out.Err))
		case out.Change.Invalid != "":
			errs = append(errs, fmt.Errorf("repair %s dead-lettered: %s", out.ID, out.Change.Invalid))
		}
	}
	return errors.Join(errs...)
}
