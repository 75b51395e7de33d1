package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/parity"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
)

// Parity runs the check a parity event asks for (the stack's parity
// schedules send them) and answers its report. The checker writes its own
// EMF line. An error fails the invocation, visibly; nothing is repaired
// then.
func (h *handler) Parity(ctx context.Context, raw json.RawMessage) (parity.Report, error) {
	var ev parity.Event
	if err := json.Unmarshal(raw, &ev); err != nil || ev.Property == "" || ev.Channel == "" {
		return parity.Report{}, fmt.Errorf("parity event %.200s: want {\"action\": %q, \"property\": …, \"channel\": …}", raw, parity.Action)
	}
	if h.parity == nil {
		return parity.Report{}, errors.New("parity: the function has no checker")
	}
	days := ev.Days
	if days == 0 {
		days = parity.DefaultDays
	}
	from, to, err := parity.Window(time.Now(), ev.From, ev.To, days)
	if err != nil {
		return parity.Report{}, err
	}
	conn, err := parity.ConnectionOf(ctx, h.syncer.Config, h.conns, ev.Property, ev.Channel)
	if err != nil {
		return parity.Report{}, err
	}
	rep, err := h.parity.Run(ctx, parity.Check{PropertyID: ev.Property, Connection: conn, From: from, To: to})
	h.log.Info("parity", "property", ev.Property, "channel", ev.Channel, "from", from, "to", to, "reads", rep.Reads,
		"days", rep.Days, "drifted", len(rep.Drifted), "repairs", rep.Repairs, "unstored", len(rep.Unstored), "err", err)
	return rep, err
}

// syncerRepairer repairs in the invocation: the repair changes go through
// the syncer as a batch from the changes queue would, so they mark their
// lanes by the same path, and the pushes they wake are dispatched at once.
type syncerRepairer struct{ sy *syncer.Syncer }

func (r syncerRepairer) Repair(ctx context.Context, changes []ari.Change) error {
	msgs := make([]syncer.Message, len(changes))
	for i, c := range changes {
		body, err := parity.Envelope(c, time.Now())
		if err != nil {
			return err
		}
		msgs[i] = syncer.Message{ID: c.EventID, Body: body}
	}
	var errs []error
	for _, out := range r.sy.HandleBatch(ctx, msgs) {
		switch {
		case out.Err != nil:
			errs = append(errs, fmt.Errorf("repair %s: %w", out.ID, out.Err))
		case out.Change.Invalid != "":
			errs = append(errs, fmt.Errorf("repair %s dead-lettered: %s", out.ID, out.Change.Invalid))
		}
	}
	return errors.Join(errs...)
}
