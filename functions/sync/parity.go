package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/parity"
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
