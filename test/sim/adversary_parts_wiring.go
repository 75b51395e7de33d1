package sim

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	connstore "github.com/fleetbucket/fleetbucket/sdk/pipeline/connections"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/resync"
)

// Parts about connections as data (docs/configuration.md, "Connections as
// data"): an operator disabling a property's connection and enabling it
// again, and remapping a connection's codes (one unmapped, then mapped
// again), mid-run, through the connections table the function reads. They
// come after the slow parts (init runs in file order), so a seed draws
// every earlier part as it did before them.
func init() { catalogue = append(catalogue, wiringParts...) }

// connCacheAge is how old a worker's view of a connection may be: a write
// is in effect everywhere within it (docs/configuration.md: 60 s).
// Repeated here: the oracle shares no code with the SDK.
const connCacheAge = 60 * time.Second

// ConnEvent is an operator's write to one property's connection to
// channel Channel at At from the run's start: Disable or Enable it, or put
// its code mappings (RoomTypes, RatePlans) when Remap. Touch, instead,
// is the PMS changing every cell of the property (one range of 7 days per
// room type and rate plan of each kind): changes the fleet must deliver.
type ConnEvent struct {
	At                   time.Duration
	Prop                 int32
	Channel              int
	Disable, Enable      bool
	Remap                bool
	RoomTypes, RatePlans map[string]string
	Touch                bool
	// UnmappedField and UnmappedCode name the code the Remap leaves out
	// ("room type", "DBL"), for the oracle; "" for none.
	UnmappedField, UnmappedCode string
}

var wiringParts = []part{
	{"disconnect", "fault", func(b *build, r *rand.Rand) ([]string, string) {
		if s := singleConnections(b); s != "" {
			return nil, s
		}
		ch := r.IntN(len(b.sc.Channels))
		p := int32(r.IntN(b.sc.Properties))
		from := time.Duration(1+r.IntN(int(b.sc.Load.Duration/time.Second)/3+1)) * time.Second
		off := oneOf(r, 20*time.Second, 150*time.Second)
		b.sc.StoredConnections = true
		b.sc.ConnEvents = append(b.sc.ConnEvents,
			ConnEvent{At: from, Prop: p, Channel: ch, Disable: true},
			ConnEvent{At: from + off, Prop: p, Channel: ch, Enable: true},
			ConnEvent{At: from + off + connCacheAge + time.Second, Prop: p, Channel: ch, Touch: true})
		return []string{"connections.disabled_for=" + off.String()}, ""
	}},
	{"remap", "fault", func(b *build, r *rand.Rand) ([]string, string) {
		if s := singleConnections(b); s != "" {
			return nil, s
		}
		ch := r.IntN(len(b.sc.Channels))
		p := int32(r.IntN(b.sc.Properties))
		l := b.sc.Load
		// Every code the simulation may send is mapped, not only the
		// load's: a bulk upload or a storm names rooms of its own, and a
		// mapping that left them out unmapped them for the rest of the run
		// (seed 939: a bulk upload's TWN, marked while workers' caches
		// still sent codes as they are, dead-lettered at its push after
		// the first write, which named the load's DBL alone).
		rooms, plans := map[string]string{}, map[string]string{}
		for _, n := range roomNames {
			rooms[n] = n
		}
		for _, n := range planNames {
			plans[n] = n
		}
		// The codes go as they are until the operator maps them; the
		// first write maps all but one, the second maps it too. The OTA's
		// ids are the PMS's codes, so the vendor reads either alike.
		lessRooms, lessPlans := maps.Clone(rooms), maps.Clone(plans)
		field, code := "room type", roomNames[r.IntN(l.Rooms)]
		// The PMS names a rate plan on every change, availability
		// included, so an unmapped plan holds back every kind's change.
		if r.IntN(2) == 1 {
			field, code = "rate plan", planNames[r.IntN(l.Plans)]
			delete(lessPlans, code)
		} else {
			delete(lessRooms, code)
		}
		from := time.Duration(1+r.IntN(int(l.Duration/time.Second)/3+1)) * time.Second
		span := oneOf(r, 20*time.Second, 90*time.Second)
		b.sc.StoredConnections = true
		b.sc.ConnEvents = append(b.sc.ConnEvents,
			ConnEvent{At: from, Prop: p, Channel: ch, Remap: true, RoomTypes: lessRooms, RatePlans: lessPlans, UnmappedField: field, UnmappedCode: code},
			ConnEvent{At: from + span, Prop: p, Channel: ch, Remap: true, RoomTypes: rooms, RatePlans: plans},
			ConnEvent{At: from + span + connCacheAge + time.Second, Prop: p, Channel: ch, Touch: true})
		return []string{"connections.unmapped=" + strings.ReplaceAll(field, " ", "_"), "connections.unmapped_for=" + span.String()}, ""
	}},
}

// singleConnections is why a connections part cannot apply: the table
// holds one connection per property and channel.
func singleConnections(b *build) string {
	for _, c := range b.sc.Channels {
		if c.Connections > 1 {
			return "the connections table holds one connection a property and channel"
		}
	}
	return ""
}

// connAdmin is the operator's view of the connections table: the CLI's
// reads and conditional puts, unbilled (they are no part of the fleet's
// cost) and outside the fleet's store faults.
type connAdmin struct {
	connReader
	mu sync.Mutex
}

func (a *connAdmin) Query(ctx context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	a.DB.mu.Lock()
	defer a.DB.mu.Unlock()
	return a.DB.queryShard(aws.ToString(in.TableName), in).Query(ctx, in)
}

func (a *connAdmin) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := a.DB
	d.mu.Lock()
	defer d.mu.Unlock()
	table := *in.TableName
	key := keyOf(d.keys[table], in.Item)
	d.forget(sizeKey(table, key))
	out, err := d.shardOf(table, key).PutItem(ctx, in)
	if err == nil {
		d.setSize(table, key, itemSize(in.Item))
	}
	return out, err
}

// connEvents plays the scenario's ConnEvents in order; a write the store
// refuses is recorded as the run's error (the case is then no test of the
// fleet).
func (s *sim) connEvents(ctx context.Context) {
	evs := slices.Clone(s.sc.ConnEvents)
	slices.SortStableFunc(evs, func(a, b ConnEvent) int { return int(a.At - b.At) })
	store := &connstore.Store{DB: &connAdmin{connReader: connReader{s.db}}, Table: connectionsTable, Config: s.cfg}
	for _, e := range evs {
		if sleep(ctx, time.Until(s.start.Add(e.At))) != nil {
			return
		}
		if s.sc.playConn != nil && !s.sc.playConn(e) {
			continue
		}
		channel := s.sc.Channels[e.Channel].Name
		prop := propID(int(e.Prop))
		var err error
		switch {
		case e.Disable || e.Enable:
			// As `fleetbucket connections enable|disable` does: the write,
			// then the resync it triggers (an enable: the whole year).
			var was, now connstore.Connection
			if was, err = store.Connection(ctx, prop, channel); err == nil {
				if now, err = store.SetDisabled(ctx, prop, channel, e.Disable); err == nil {
					err = s.resyncTriggered(ctx, "enable-", prop, channel, was.Property, now.Property)
				}
			}
		case e.Remap:
			var c connstore.Connection
			if c, err = store.Connection(ctx, prop, channel); err == nil {
				was := c.Property
				c.RoomTypes, c.RatePlans = e.RoomTypes, e.RatePlans
				if _, err = store.Put(ctx, c); err == nil {
					err = s.resyncTriggered(ctx, "remap-", prop, channel, was, c.Property)
				}
			}
		case e.Touch:
			s.touch(e.Prop)
		}
		if err != nil {
			s.mu.Lock()
			s.connErrs = append(s.connErrs, fmt.Sprintf("%v %s/%s: %v", e.At, prop, channel, err))
			s.mu.Unlock()
		}
	}
}

// resyncTriggered sends the resync `fleetbucket connections put`, and
// `enable`, send after their write (docs/design.md, "Where the triggers
// live"): the cells whose OTA ids the write added or changed (every cell
// of a connection enabled), over the year from the
// horizon's first day, held on the queue until every worker's cache of
// connections holds the write (resync.TriggerDelay). Without it a cell the
// mapping left out while a resync ran was never sent again (seed 820: a
// hotel resynced whole while its booking connection had BAR unmapped
// skipped BAR's cells, and 43 of their days stayed at nothing on booking).
func (s *sim) resyncTriggered(ctx context.Context, why, prop, channel string, was, now config.Property) error {
	cells, _, some := resync.Trigger(&was, now)
	if !some {
		return nil
	}
	r := ari.Resync{ResyncID: why + prop + "-" + channel, PropertyID: prop, Channel: channel, Cells: cells,
		From: day0.Format(ari.DateLayout), To: day0.AddDate(0, 0, 364).Format(ari.DateLayout)}
	return resync.SendAfter(ctx, s.sqs, s.changes.Name, r, time.Now(), resync.TriggerDelay)
}

// touch sends a change to every cell of property p: one 7-day range from
// the horizon's first day per kind, room type and rate plan, valued
// 400 + 10·room + plan (a value every kind and format can carry).
func (s *sim) touch(p int32) {
	l := s.sc.Load
	for kind := range kindNames {
		for room := range l.Rooms {
			for plan := range l.Plans {
				s.send(change{prop: p, kind: kind, room: room, plan: plan, from: 0, days: 7, value: int32(400 + room*10 + plan)})
			}
		}
	}
}

// offCheck counts a request for hotel at now that reaches the vendor while
// its connection is disabled, once every worker must know it (the cache's
// age and a push's longest life after the disable).
func (v *Vendor) offCheck(hotel string, now time.Time) {
	for _, o := range v.off {
		if o.hotel == hotel && !now.Before(v.start.Add(o.from)) && now.Before(v.start.Add(o.to)) {
			v.OffPushes++
			if v.FirstOff == "" {
				v.FirstOff = fmt.Sprintf("%s %s at %v: a push to a connection disabled at %v (enabled at %v)", v.Name, hotel, now.Format(time.StampMicro), o.disabled, o.to)
			}
		}
	}
}

// offSpan is a stretch in which a hotel's connection is disabled for
// every worker.
type offSpan struct {
	hotel              string
	disabled, from, to time.Duration
}

// pushLife bounds how long a push taken up before a disable may still be
// sending: the longest push_timeout the catalogue draws and a second.
const pushLife = 46 * time.Second

// armConnChecks gives each vendor the stretches in which a connection of
// its channel is disabled for every worker.
func (s *sim) armConnChecks() {
	var disabledAt = map[[2]int32]time.Duration{}
	for _, e := range s.sc.ConnEvents {
		k := [2]int32{e.Prop, int32(e.Channel)}
		switch {
		case e.Disable:
			disabledAt[k] = e.At
		case e.Enable:
			d, ok := disabledAt[k]
			if from := d + connCacheAge + pushLife; ok && from < e.At {
				v := s.vendors[e.Channel]
				v.off = append(v.off, offSpan{hotel: propID(int(e.Prop)), disabled: d, from: from, to: e.At})
			}
		}
	}
}

// connCheck adds the connections' invariants to r, and has the ledger
// excuse the days they allow to stay stale:
//   - a connection disabled in the run drops what it held pending and
//     what came while it was disabled (docs/configuration.md): a day of it
//     whose newest value was published before the enable was in effect
//     everywhere (enable + 60 s) may stay stale until a resync sends it;
//     a day published later must arrive.
//   - a code left unmapped: a day of that code whose newest value was
//     published before the mapping was back in effect everywhere may stay
//     stale if a dead letter names the code, the channel and the property
//     (the operator redrives it); a day published later must arrive.
func (s *sim) connCheck(r *Report) {
	if len(s.sc.ConnEvents) == 0 {
		return
	}
	s.mu.Lock()
	for _, e := range s.connErrs {
		r.Violations = append(r.Violations, "connections: an operator's write failed: "+e)
	}
	s.mu.Unlock()
	for _, v := range s.vendors {
		if v.OffPushes > 0 {
			r.Violations = append(r.Violations, fmt.Sprintf("disconnect: %d pushes to a disabled connection; first: %s", v.OffPushes, v.FirstOff))
		}
	}
	type excuse struct {
		prop     int32
		ch       int
		until    time.Duration // newest value published before this
		room     int           // -1: any
		plan     int           // -1: any
		lettered bool
	}
	var excuses []excuse
	disabledAt, unmapped := map[[2]int32]bool{}, map[[2]int32]ConnEvent{}
	letters := s.sqs.DeadLetters()
	for _, e := range s.sc.ConnEvents {
		k := [2]int32{e.Prop, int32(e.Channel)}
		switch {
		case e.Disable:
			disabledAt[k] = true
		case e.Enable && disabledAt[k]:
			excuses = append(excuses, excuse{prop: e.Prop, ch: e.Channel, until: e.At + connCacheAge, room: -1, plan: -1, lettered: true})
		case e.Remap && e.UnmappedCode != "":
			unmapped[k] = e
		case e.Remap:
			u, ok := unmapped[k]
			if !ok {
				continue
			}
			field, code := u.UnmappedField, u.UnmappedCode
			want := fmt.Sprintf("unmapped %s %q on channel %q of property %q", field, code, s.sc.Channels[e.Channel].Name, propID(int(e.Prop)))
			x := excuse{prop: e.Prop, ch: e.Channel, until: e.At + connCacheAge, room: -1, plan: -1}
			if field == "room type" {
				x.room = indexOf(roomNames, code)
			} else {
				x.plan = indexOf(planNames, code)
			}
			for _, m := range letters {
				if strings.Contains(reasonOf(m), want) {
					x.lettered = true
					break
				}
			}
			excuses = append(excuses, x)
		}
	}
	s.ledger.mu.Lock()
	s.ledger.excuse = func(copyOf int, k rowKey, pubAt time.Duration) bool {
		for _, x := range excuses {
			if x.lettered && s.copyOf[copyOf] == x.ch && k.prop == x.prop && pubAt < x.until &&
				(x.room < 0 || int(k.room) == x.room) && (x.plan < 0 || int(k.plan) == x.plan) {
				return true
			}
		}
		return false
	}
	s.ledger.mu.Unlock()
}
