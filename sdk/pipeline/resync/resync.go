package resync

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// StateReader reads stored state (ari.Store.Read).
type StateReader interface {
	Read(ctx context.Context, ranges []ari.Range) (map[string][]ari.Day, error)
}

// Cell is one cell a resync reads.
type Cell struct {
	ari.ResyncCell
	// Sparse marks a cell the store need not hold: a rate plan's own
	// status of a kind its format holds per room type (a rate plan closed
	// on Expedia AR or OpenTravel), or a room type's own cell of a kind
	// held per room type × rate plan. It is pushed where held and never
	// reported missing.
	Sparse bool
}

// Cells are the cells a resync covers of kind on one connection: the ones
// it names, or those the connection's mapping names, by the key the
// channel's format holds kind by (format.Traits.RoomTypeKinds; named
// cells alike, see named):
//   - a kind held per room type: each room type alone, and each room type ×
//     rate plan as a sparse cell;
//   - any other kind: every (room type, rate plan) pair, and each room
//     type alone, as a sparse cell where the mapping names rate plans: a
//     PMS may send a kind per room type (inventory) to a format that
//     passes its cells through (json), and a live change so keyed is
//     pushed so.
//
// A connection that maps no codes names no cells: the resync must name
// them.
func Cells(r ari.Resync, t config.Target, kind string) ([]Cell, error) {
	perRoom, err := heldPerRoomType(t.Format, kind)
	if err != nil {
		return nil, err
	}
	if len(r.Cells) > 0 {
		return named(r.Cells, perRoom), nil
	}
	rooms := sortedKeys(t.Codes.RoomTypes)
	if len(rooms) == 0 {
		return nil, fmt.Errorf("resync %q: the connection of %s to %s maps no room types: name the cells (--cells)", r.ResyncID, r.PropertyID, t.Channel)
	}
	plans := sortedKeys(t.Codes.RatePlans)
	if len(plans) == 0 {
		plans = []string{""}
	}
	var out []Cell
	for _, room := range rooms {
		if perRoom {
			out = append(out, Cell{ResyncCell: ari.ResyncCell{RoomType: room}})
		}
		for _, plan := range plans {
			if perRoom && plan == "" {
				continue
			}
			out = append(out, Cell{ResyncCell: ari.ResyncCell{RoomType: room, RatePlan: plan}, Sparse: perRoom})
		}
		if !perRoom && plans[0] != "" {
			out = append(out, Cell{ResyncCell: ari.ResyncCell{RoomType: room}, Sparse: true})
		}
	}
	return out, nil
}

// named are the cells a resync names, as a kind held per room type
// (perRoom) holds them: a named room type × rate plan is the room type's
// own cell over the same dates, and the pair's as a sparse cell (a rate
// plan's own status), each once.
func named(cells []ari.ResyncCell, perRoom bool) []Cell {
	var out []Cell
	seen := map[ari.ResyncCell]bool{}
	add := func(c Cell) {
		if !seen[c.ResyncCell] {
			seen[c.ResyncCell] = true
			out = append(out, c)
		}
	}
	for _, c := range cells {
		if perRoom && c.RatePlan != "" {
			room := c
			room.RatePlan = ""
			add(Cell{ResyncCell: room})
			add(Cell{ResyncCell: c, Sparse: true})
			continue
		}
		add(Cell{ResyncCell: c})
	}
	return out
}

// heldPerRoomType says whether the format named name ("" is json) holds
// kind per room type.
func heldPerRoomType(name, kind string) (bool, error) {
	if name == "" {
		name = format.JSON
	}
	f, ok := format.Lookup(name)
	if !ok {
		return false, fmt.Errorf("format %q is not registered", name)
	}
	return slices.Contains(f.Traits().RoomTypeKinds, kind), nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Plan is what a resync makes pending on the lanes of one property and
// kind.
type Plan struct {
	Kind string
	// Elements are the stored dates, one bulk element per run of
	// consecutive dates of a cell.
	Elements []lane.Element
	// Cells and Dates count the cells with some state and their dates.
	Cells, Dates int
	// Missing are the cells of the window the store holds no date of, and
	// MissingDates every date of the window without state, whatever its
	// cell; neither counts a sparse cell.
	Missing      []ari.ResyncCell
	MissingDates int
}

// PlanKind reads the stored state of cells over the resync's window (each
// cell's own dates where it names them), in one read, and returns the bulk
// elements that push it.
func PlanKind(ctx context.Context, st StateReader, r ari.Resync, kind string, cells []Cell) (Plan, error) {
	out := Plan{Kind: kind}
	ranges := make([]ari.Range, 0, len(cells))
	for _, c := range cells {
		from, to := windowOf(r, c.ResyncCell)
		ranges = append(ranges, ari.Range{Cell: cellKey(r.PropertyID, kind, c.ResyncCell), From: from, To: to})
	}
	state, err := st.Read(ctx, ranges)
	if err != nil {
		return Plan{}, fmt.Errorf("resync %q: read the state of %s %s: %w", r.ResyncID, r.PropertyID, kind, err)
	}
	for i, c := range cells {
		want := (ari.Change{From: ranges[i].From, To: ranges[i].To}).Dates()
		days := state[ranges[i].Cell]
		if !c.Sparse {
			out.MissingDates += len(want) - len(days)
		}
		if len(days) == 0 {
			if !c.Sparse {
				out.Missing = append(out.Missing, c.ResyncCell)
			}
			continue
		}
		out.Cells++
		out.Dates += len(days)
		out.Elements = append(out.Elements, runs(c.ResyncCell, days)...)
	}
	return out, nil
}

// runs are the bulk elements of a cell's stored days (in date order): one
// per run of consecutive dates.
func runs(c ari.ResyncCell, days []ari.Day) []lane.Element {
	var out []lane.Element
	var prev time.Time
	for _, d := range days {
		t, err := time.Parse(ari.DateLayout, d.Date)
		if err != nil {
			continue
		}
		if n := len(out); n > 0 && t.Sub(prev) == 24*time.Hour {
			out[n-1].To = d.Date
		} else {
			out = append(out, lane.Element{RoomType: c.RoomType, RatePlan: c.RatePlan, From: d.Date, To: d.Date, Sequence: lane.BulkSequence})
		}
		prev = t
	}
	return out
}

// ByMonth cuts each element at the edges of calendar months, for an
// endpoint that sends each month in requests of its own (format.SplitOf is
// format.SplitMonth). A push carries whole elements, so a cell's year
// would go as twelve requests of that cell alone, and each month once per
// cell; cut by month, a bulk push carries the same month of every cell
// together (the syncer orders bulk elements by date), and a month goes in
// one request for all of them. An element whose dates do not parse is kept
// as it is.
func ByMonth(els []lane.Element) []lane.Element {
	out := make([]lane.Element, 0, len(els))
	for _, e := range els {
		from, err1 := time.Parse(ari.DateLayout, e.From)
		to, err2 := time.Parse(ari.DateLayout, e.To)
		if err1 != nil || err2 != nil {
			out = append(out, e)
			continue
		}
		for !from.After(to) {
			end := time.Date(from.Year(), from.Month()+1, 0, 0, 0, 0, 0, time.UTC) // the month's last day
			if end.After(to) {
				end = to
			}
			part := e
			part.From, part.To = from.Format(ari.DateLayout), end.Format(ari.DateLayout)
			out = append(out, part)
			from = end.AddDate(0, 0, 1)
		}
	}
	return out
}

func windowOf(r ari.Resync, c ari.ResyncCell) (string, string) {
	if c.From != "" {
		return c.From, c.To
	}
	return r.From, r.To
}

func cellKey(property, kind string, c ari.ResyncCell) string {
	return ari.Change{PropertyID: property, Kind: kind, RoomType: c.RoomType, RatePlan: c.RatePlan}.Cell()
}

// Kinds are the kinds a resync covers on a channel: those it names, or
// every kind.
func Kinds(r ari.Resync) []string {
	if len(r.Kinds) > 0 {
		return r.Kinds
	}
	return slices.Clone(ari.Kinds)
}

// Trigger is the resync a connection's write calls for, from was (nil: the
// connection is new) to now:
//   - a connection that starts receiving (new, enabled again, or pointed
//     at another hotel ref or credential) is resynced whole (all true);
//   - a mapping changed resyncs the cells whose OTA ids were added or
//     changed: each such room type with every rate plan mapped, each such
//     rate plan with every room type mapped;
//   - anything else (a mapping removed, kinds narrowed, a disable) needs
//     no push.
func Trigger(was *config.Property, now config.Property) (cells []ari.ResyncCell, all, any bool) {
	if now.Disabled {
		return nil, false, false
	}
	if was == nil || was.Disabled || was.HotelRef != now.HotelRef || was.Credential != now.Credential || was.Channel != now.Channel {
		return nil, true, true
	}
	rooms := changed(was.RoomTypes, now.RoomTypes)
	plans := changed(was.RatePlans, now.RatePlans)
	if len(rooms) == 0 && len(plans) == 0 {
		return nil, false, false
	}
	allPlans := sortedKeys(now.RatePlans)
	if len(allPlans) == 0 {
		allPlans = []string{""}
	}
	seen := map[ari.ResyncCell]bool{}
	add := func(room, plan string) {
		c := ari.ResyncCell{RoomType: room, RatePlan: plan}
		if !seen[c] {
			seen[c] = true
			cells = append(cells, c)
		}
	}
	for _, room := range rooms {
		for _, plan := range allPlans {
			add(room, plan)
		}
	}
	for _, plan := range plans {
		for _, room := range sortedKeys(now.RoomTypes) {
			add(room, plan)
		}
	}
	return cells, false, len(cells) > 0
}

// changed are the codes now maps to an id was did not map them to.
func changed(was, now map[string]string) []string {
	var out []string
	for _, code := range sortedKeys(now) {
		if id, ok := was[code]; !ok || id != now[code] {
			out = append(out, code)
		}
	}
	return out
}
