package mockota

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetbucket/fleetbucket/test/otaformat"
)

// Wire formats a mock can take (Config.Wire.Format).
const (
	WireOpenTravel = "opentravel"
	WireExpediaAR  = "expedia-ar"
)

// Wire makes the mock a vendor with its own message format, read by
// test/otaformat's decoders (which share no code with fleetbucket's
// encoders):
//
//   - "opentravel" (Booking.com B.XML): HTTP basic auth, whose username is
//     the credential the mock meters by; OTA_HotelAvailNotifRQ on the
//     availability and restrictions endpoints, OTA_HotelRateAmountNotifRQ on
//     rates. A request it cannot read (wrong namespace, no hotel, more than
//     one month) is answered 400 with <Errors> and not charged, like any
//     malformed request; one naming an unmapped room type is charged and
//     answered 200 with <Errors> whose RecordIDs name those parts, and
//     nothing of it is applied.
//   - "expedia-ar": the username in the body's Authentication is the
//     credential; every error (wrong namespace, no hotel, over 5,000
//     updates, an unmapped room type, an unknown credential: 1001) is
//     charged and answered 200 with an <Error code>, nothing applied, as
//     Expedia does.
//
// A credential the mock does not know (Config.Credentials) is refused with
// a 401 (OpenTravel, unless CredentialInBody) or inside a 200 (Expedia AR
// always; OpenTravel with CredentialInBody: an <Error Type="4">). A hotel
// in DisconnectedHotels is refused with a 403 carrying the format's error.
//
// Throttles and injected failures are answered with the format's error
// body. Refused requests are recorded with Request.Refused and never count
// as accepted.
type Wire struct {
	Format string
	// MappedRooms are the room types the vendor has mapped; empty maps all.
	MappedRooms []string
	// CredentialInBody: an OpenTravel vendor refuses an unknown credential
	// inside a 200, with an authentication error (EWT 4), not a 401.
	CredentialInBody bool
	// DisconnectedHotels are hotel ids the account has no access to (not
	// connected, deactivated): their requests are charged and refused
	// with a 403, nothing applied.
	DisconnectedHotels []string
}

func (w *Wire) validate() error {
	if w == nil {
		return nil
	}
	if w.Format != WireOpenTravel && w.Format != WireExpediaAR {
		return fmt.Errorf("mockota: Wire.Format %q, want %q or %q", w.Format, WireOpenTravel, WireExpediaAR)
	}
	return nil
}

func (w *Wire) rules() otaformat.Rules {
	if len(w.MappedRooms) == 0 {
		return otaformat.Rules{}
	}
	m := map[string]bool{}
	for _, r := range w.MappedRooms {
		m[r] = true
	}
	return otaformat.Rules{MappedRooms: m}
}

// wireRequest is what checkWire learnt of a request.
type wireRequest struct {
	format, kind string
	// status and msg: non-zero for a request refused before the limiter.
	status int
	msg    string
	// refusal: the vendor's refusal of a well-formed, charged request.
	refusal *otaformat.Refusal
	// early: the refusal answered before the limiter (status 400).
	early *otaformat.Refusal
	// push is what a push asks the vendor to apply; read is set instead on
	// a read of what the vendor holds.
	push otaformat.Message
	read *otaformat.Read
}

// checkWire is check for a Config.Wire format.
func (s *Server) checkWire(r *http.Request, rec *Request, body []byte, readErr error) *wireRequest {
	wr := &wireRequest{format: s.cfg.Wire.Format}
	fail := func(status int, msg string) *wireRequest {
		wr.status, wr.msg = status, msg
		return wr
	}
	if r.Method != http.MethodPost {
		return fail(http.StatusMethodNotAllowed, "method not allowed, want POST")
	}
	ep, ok := strings.CutPrefix(r.URL.Path, "/v1/")
	if !ok || ep == "" || strings.Contains(ep, "/") {
		return fail(http.StatusNotFound, "no such endpoint, want /v1/{endpoint}")
	}
	rec.Endpoint, wr.kind = ep, ep
	if rec.JobID == "" {
		return fail(http.StatusBadRequest, "missing X-Job-Id header")
	}
	if readErr != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](readErr); ok {
			return fail(http.StatusRequestEntityTooLarge, "body too large")
		}
		return fail(http.StatusBadRequest, "unreadable body")
	}
	var err error
	var m otaformat.Message
	badLogin := otaformat.ExpediaARBadLogin()
	switch wr.format {
	case WireOpenTravel:
		user, pw, ok := r.BasicAuth()
		if !ok || user == "" || pw == "" {
			return fail(http.StatusUnauthorized, "missing basic auth credential")
		}
		rec.Credential = user
		m, err = otaformat.DecodeOpenTravel(body, ep, s.cfg.Wire.rules())
		badLogin = otaformat.OpenTravelBadLogin()
		if !s.cfg.Wire.CredentialInBody {
			badLogin = nil
		}
	case WireExpediaAR:
		if otaformat.IsExpediaPARR(body) {
			var q otaformat.Read
			q, err = otaformat.DecodeExpediaPARR(body)
			wr.read, rec.Read = &q, true
			m = otaformat.Message{User: q.User, Hotel: q.Hotel}
		} else {
			m, err = otaformat.DecodeExpediaAR(body, ep, s.cfg.Wire.rules())
		}
		if m.User == "" {
			return fail(http.StatusUnauthorized, "missing Authentication username")
		}
		rec.Credential = m.User
	}
	if len(s.creds) > 0 && !s.creds[rec.Credential] {
		if badLogin == nil {
			return fail(http.StatusUnauthorized, "unknown credential")
		}
		wr.refusal = badLogin
		return wr
	}
	if m.Hotel != "" && slices.Contains(s.cfg.Wire.DisconnectedHotels, m.Hotel) {
		wr.refusal = otaformat.OpenTravelHotelDenied(m.Hotel)
		if wr.format == WireExpediaAR {
			wr.refusal = otaformat.ExpediaARHotelDenied(m.Hotel)
		}
		return wr
	}
	wr.push = m
	var refusal *otaformat.Refusal
	if errors.As(err, &refusal) {
		if refusal.Status != http.StatusOK {
			wr.early = refusal
			return fail(refusal.Status, refusal.Error())
		}
		wr.refusal = refusal
	} else if err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	return wr
}

// answer is the body for status: the format's success, its refusal, or an
// error naming the status.
func (wr *wireRequest) answer(status int, msg string) []byte {
	refusal := wr.early
	switch {
	case wr.refusal != nil && status == wr.refusal.Status:
		refusal = wr.refusal
	case accepted(status):
		refusal = nil
	case refusal == nil:
		refusal = &otaformat.Refusal{Status: status, Code: strconv.Itoa(status), Text: msg}
	}
	if wr.read != nil {
		return otaformat.AnswerExpediaPARR(refusal, "", "", nil)
	}
	if wr.format == WireExpediaAR {
		return otaformat.AnswerExpediaAR(refusal)
	}
	return otaformat.AnswerOpenTravel(wr.kind, refusal)
}
