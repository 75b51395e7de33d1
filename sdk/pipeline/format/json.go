package format

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/fleetbucket/fleetbucket/sdk/otapush"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
)

// jsonFormat is fleetbucket's own body (the demo's, and vendors that take
// JSON): {"hotel_ref", "kind", "items": [{"room_type", "rate_plan",
// "days": [{"date", "sequence", "values"}]}]}, byte for byte what
// sdk/pipeline/syncer sent before formats existed. Values pass through
// unread. The answer is read from the status alone: 2xx accepted, 429
// throttled, 5xx transient, any other refused.
type jsonFormat struct{}

type jsonPush struct {
	HotelRef string     `json:"hotel_ref"`
	Kind     string     `json:"kind"`
	Items    []jsonCell `json:"items"`
}

type jsonCell struct {
	RoomType string    `json:"room_type"`
	RatePlan string    `json:"rate_plan,omitempty"`
	Days     []ari.Day `json:"days"`
}

func (jsonFormat) Traits() Traits {
	return Traits{SplitBy: SplitNone, Credential: CredentialToken}
}

func (jsonFormat) Encode(w Work) (Request, error) {
	if err := checkOneKind(JSON, w); err != nil {
		return Request{}, err
	}
	p := jsonPush{HotelRef: w.HotelRef, Kind: w.Kind}
	for _, c := range w.Cells {
		if len(c.Days) > 0 {
			p.Items = append(p.Items, jsonCell{RoomType: c.RoomType, RatePlan: c.RatePlan, Days: c.Days})
		}
	}
	body, err := json.Marshal(p)
	if err != nil {
		return Request{}, fmt.Errorf("format json: %w", err)
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if !w.Secret.IsZero() {
		h.Set("Authorization", "Bearer "+w.Secret.Reveal())
	}
	return Request{Method: http.MethodPost, Header: h, Body: body, Work: w}, nil
}

func (jsonFormat) Decode(_ Request, resp Response) Outcome {
	if o, ok := byStatus(resp); ok {
		return o
	}
	if resp.Status >= 200 && resp.Status < 300 {
		return Outcome{Verdict: Accepted}
	}
	// The status is all there is: 401 and 403 refuse the credential, any
	// other 4xx the message.
	scope := otapush.ScopeMessage
	if resp.Status == http.StatusUnauthorized || resp.Status == http.StatusForbidden {
		scope = otapush.ScopeCredential
	}
	return refusal(scope, fmt.Sprintf("HTTP %d: %s", resp.Status, snippet(resp.Body)))
}
