package syncer

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// A vendor refuses every message that names room type DBL, naming no
// change, and each push ends after budget requests (a vendor answering in
// seconds within a push's 20 s, a part's token beyond the call's hold).
// Isolating four refused changes among twelve takes more requests than
// one push sends: the lane's pushes send the parts the previous one left
// apart, so the isolation goes on where it stopped and ends; begun again
// whole, each push would spend its budget on the same first halves
// (adversary seeds 7 and 32).
func TestRefusalPartsNotSentGoApartInTheNextPush(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":{"path":"/r","limit":{"rate":5,"burst":5}}},"credentials":{"c1":{"token_env":"T"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &Syncer{Config: cfg}
	id := lane.ID{Property: "hotel-1", Kind: "rates", Channel: "bk", Credential: "c1", HotelRef: "BK-1"}
	var pending []lane.Element
	state := map[string][]ari.Day{}
	refused := map[string]bool{}
	for i := range 12 {
		room := "TWN"
		if i%3 == 1 {
			room = "DBL"
		}
		e := lane.Element{RoomType: room, RatePlan: "BAR", From: fmt.Sprintf("2027-01-%02d", i+1), To: fmt.Sprintf("2027-01-%02d", i+1), Sequence: int64(i + 1)}
		pending = append(pending, e)
		state[cellOf(id, e)] = append(state[cellOf(id, e)], ari.Day{Date: e.From, Sequence: e.Sequence, Values: json.RawMessage(`{"a":1}`)})
		if room == "DBL" {
			refused[e.String()] = true
		}
	}
	for _, tt := range []struct {
		budget, maxPushes int
	}{
		// 4 refused among 12: at most 2·⌈log₂ 12⌉ = 8 requests each past
		// the first, over as many pushes as the budget asks.
		{budget: 1, maxPushes: 1 + 4*8}, {budget: 3, maxPushes: (1 + 4*8 + 2) / 3}, {budget: 100, maxPushes: 1},
	} {
		t.Run(fmt.Sprintf("budget %d", tt.budget), func(t *testing.T) {
			left, ref := append([]lane.Element(nil), pending...), laneRef{Token: "t"}
			sent, dead := map[string]bool{}, map[string]bool{}
			pushes := 0
			for ; len(left) > 0 && pushes < 100; pushes++ {
				st := pushed{lane: id, owner: "t", elements: left, state: state, settled: newSettlement(), target: &config.Target{}, apart: ref.Apart}
				msgs, err := s.pushMessages(context.Background(), st)
				if err != nil {
					t.Fatal(err)
				}
				p := dispatch.Payload{Messages: msgs, State: st}
				for i := 0; i < len(p.Messages) && i < tt.budget; i++ {
					c := p.Messages[i].State.(carriage)
					bad := false
					for _, e := range c.elements {
						bad = bad || e.RoomType == "DBL"
					}
					if !bad {
						p.Messages[i].Accepted = true
						for _, e := range c.elements {
							sent[e.String()] = true
						}
						continue
					}
					parts, letters, err := s.Refused(context.Background(), job.Job{ID: "j"}, &p, i, &otapush.PermanentError{Status: 200, Summary: "402: Room ID is not valid", Scope: otapush.ScopeMessage})
					if err != nil {
						t.Fatal(err)
					}
					for _, l := range letters {
						var lj job.Job
						if err := json.Unmarshal([]byte(l.Body), &lj); err != nil {
							t.Fatal(err)
						}
						var lr laneRef
						if err := json.Unmarshal(lj.Payload, &lr); err != nil {
							t.Fatal(err)
						}
						for _, e := range lr.Refused {
							dead[e] = true
						}
					}
					p.Messages = append(p.Messages, parts...)
				}
				// What the lane's next job carries, through its payload.
				body, err := json.Marshal(laneRef{Token: "t", Apart: st.apartNext(p.Messages)})
				if err != nil {
					t.Fatal(err)
				}
				ref = laneRef{}
				if err := json.Unmarshal(body, &ref); err != nil {
					t.Fatal(err)
				}
				left = without(left, st.accepted(p.Messages))
			}
			if len(left) > 0 || pushes > tt.maxPushes {
				t.Fatalf("%d pushes of %d requests at most: %d changes still pending (%v); want none after %d pushes", pushes, tt.budget, len(left), left, tt.maxPushes)
			}
			for _, e := range pending {
				if refused[e.String()] != dead[e.String()] || !refused[e.String()] != sent[e.String()] {
					t.Errorf("%v: dead-lettered %v, accepted %v; want only DBL's dead-lettered and every other accepted", e, dead[e.String()], sent[e.String()])
				}
			}
		})
	}
}
