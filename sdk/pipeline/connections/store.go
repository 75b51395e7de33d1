package connections

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
)

// The table's key: a connection is the item (property, channel); the
// counter of a code met unmapped is (UnmappedPrefix + property,
// channel#field#code), out of any property's partition since property
// ids hold no '#'.
const (
	PartitionKey   = "pk"
	SortKey        = "sk"
	UnmappedPrefix = "unmapped#"
)

// DynamoDBAPI is the part of *dynamodb.Client the store uses.
type DynamoDBAPI interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
}

// writeAttribute holds a random id of the Put that wrote a connection's
// item, by which a Put the SDK sent again after a lost answer knows the
// item its condition found as its own, even beside another writer's put
// of the same content.
const writeAttribute = "write_id"

// Connection is one property's connection to one channel, as stored.
type Connection struct {
	PropertyID string
	config.Property
	// Version counts the connection's writes: 0 for one never written.
	// Put writes only over the version it was given.
	Version int64
}

// Store reads and writes connections in Table.
type Store struct {
	DB    DynamoDBAPI
	Table string
	// Config holds the channels a connection must name: every write is
	// checked against it as the connections file is.
	Config *config.Config
	Now    func() time.Time
}

// VersionError is a write refused because the connection changed since it
// was read (or, for a first write, exists already): read it again.
type VersionError struct {
	PropertyID, Channel string
	Want, Have          int64
}

func (e *VersionError) Error() string {
	if e.Want == 0 {
		return fmt.Sprintf("connection %s/%s exists already (version %d): get it and put over its version", e.PropertyID, e.Channel, e.Have)
	}
	return fmt.Sprintf("connection %s/%s is at version %d, not %d: it changed since it was read; get it again", e.PropertyID, e.Channel, e.Have, e.Want)
}

// NotFoundError is a connection that is not in the store.
type NotFoundError struct{ PropertyID, Channel string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("property %q has no connection to channel %q", e.PropertyID, e.Channel)
}

// Validate checks c with the connections file's rules.
func (s *Store) Validate(c Connection) error {
	if s.Config == nil {
		return errors.New("connections store: no config to check connections against")
	}
	if errs := s.Config.ValidateConnections(c.PropertyID, []config.Property{c.Property}); len(errs) > 0 {
		return fmt.Errorf("invalid connection:\n  %w", errors.Join(errs...))
	}
	return nil
}

// Get returns a property's connections, by channel; none (and no error)
// for a property the store does not know.
func (s *Store) Get(ctx context.Context, propertyID string) ([]Connection, error) {
	var out []Connection
	var start map[string]types.AttributeValue
	for {
		res, err := s.DB.Query(ctx, &dynamodb.QueryInput{
			TableName:                 &s.Table,
			KeyConditionExpression:    aws.String("#pk = :pk"),
			ExpressionAttributeNames:  map[string]string{"#pk": PartitionKey},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(propertyID)},
			ExclusiveStartKey:         start,
			// A Cache's bound counts from the write: an eventually
			// consistent read could return the item as it was before it.
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return nil, s.wrap("read connections of "+propertyID, err)
		}
		for _, item := range res.Items {
			c, err := decode(item)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		if start = res.LastEvaluatedKey; len(start) == 0 {
			return out, nil
		}
	}
}

// Connection returns one connection, or a *NotFoundError.
func (s *Store) Connection(ctx context.Context, propertyID, channel string) (Connection, error) {
	cs, err := s.Get(ctx, propertyID)
	if err != nil {
		return Connection{}, err
	}
	for _, c := range cs {
		if c.Channel == channel {
			return c, nil
		}
	}
	return Connection{}, &NotFoundError{PropertyID: propertyID, Channel: channel}
}

// Put writes c over the version it carries (0: a new connection) and
// returns it at its new version. A connection that changed meanwhile is a
// *VersionError; one that breaks the file's rules is refused unwritten.
func (s *Store) Put(ctx context.Context, c Connection) (Connection, error) {
	if err := s.Validate(c); err != nil {
		return Connection{}, err
	}
	next := c
	next.Version = c.Version + 1
	item := encode(next, s.now())
	write := rand.Text()
	item[writeAttribute] = str(write)
	in := &dynamodb.PutItemInput{
		TableName:                           &s.Table,
		Item:                                item,
		ExpressionAttributeNames:            map[string]string{"#pk": PartitionKey},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if c.Version == 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(#pk)")
	} else {
		in.ConditionExpression = aws.String("attribute_exists(#pk) AND version = :v")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": num(c.Version)}
	}
	_, err := s.DB.PutItem(ctx, in)
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) && sOf(failed.Item[writeAttribute]) == write {
		// The SDK sent the write again after an answer it never got, and
		// the condition found this write's own item: it landed.
		return next, nil
	}
	if errors.As(err, &failed) {
		return Connection{}, &VersionError{PropertyID: c.PropertyID, Channel: c.Channel, Want: c.Version, Have: versionOf(failed.Item)}
	}
	if err != nil {
		return Connection{}, s.wrap("write connection "+c.PropertyID+"/"+c.Channel, err)
	}
	return next, nil
}

// SetDisabled disables (or enables) a connection, conditional on the
// version read, and returns it as written. Disabling stops its pushes;
// what its lanes hold pending is dropped at their next push, within the
// cache's bound.
func (s *Store) SetDisabled(ctx context.Context, propertyID, channel string, disabled bool) (Connection, error) {
	for attempt := 0; ; attempt++ {
		c, err := s.Connection(ctx, propertyID, channel)
		if err != nil {
			return Connection{}, err
		}
		if c.Disabled == disabled {
			return c, nil
		}
		c.Disabled = disabled
		out, err := s.Put(ctx, c)
		var moved *VersionError
		if errors.As(err, &moved) && attempt < 5 {
			continue // written meanwhile, or an eventually consistent read behind: read it again
		}
		return out, err
	}
}

// List calls fn with every connection, in the table's order.
func (s *Store) List(ctx context.Context, fn func(Connection) error) error {
	return s.scan(ctx, false, func(item map[string]types.AttributeValue) error {
		c, err := decode(item)
		if err != nil {
			return err
		}
		return fn(c)
	})
}

func (s *Store) scan(ctx context.Context, unmapped bool, fn func(map[string]types.AttributeValue) error) error {
	filter := "NOT begins_with(#pk, :u)"
	if unmapped {
		filter = "begins_with(#pk, :u)"
	}
	var start map[string]types.AttributeValue
	for {
		res, err := s.DB.Scan(ctx, &dynamodb.ScanInput{
			TableName:                 &s.Table,
			FilterExpression:          &filter,
			ExpressionAttributeNames:  map[string]string{"#pk": PartitionKey},
			ExpressionAttributeValues: map[string]types.AttributeValue{":u": str(UnmappedPrefix)},
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return s.wrap("scan connections", err)
		}
		for _, item := range res.Items {
			if err := fn(item); err != nil {
				return err
			}
		}
		if start = res.LastEvaluatedKey; len(start) == 0 {
			return nil
		}
	}
}

// Unmapped is a code met unmapped: how many changes named it, and when
// the last did.
type Unmapped struct {
	PropertyID, Channel string
	Field, Code         string
	Count               int64
	LastSeen            time.Time
}

// CountUnmapped counts a change to a code the connection does not map,
// with one UpdateItem ADD. An ADD the SDK sends again after a lost answer
// counts twice: a count is at least the changes that met the code.
func (s *Store) CountUnmapped(ctx context.Context, propertyID, channel, field, code string) error {
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.Table,
		Key: map[string]types.AttributeValue{
			PartitionKey: str(UnmappedPrefix + propertyID),
			SortKey:      str(channel + "#" + field + "#" + code),
		},
		UpdateExpression:          aws.String("ADD #n :one SET last_seen = :now"),
		ExpressionAttributeNames:  map[string]string{"#n": "count"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1), ":now": num(s.now().Unix())},
	})
	return s.wrap("count unmapped code", err)
}

// Unmapped lists the codes met unmapped, the most frequent first.
func (s *Store) Unmapped(ctx context.Context) ([]Unmapped, error) {
	var out []Unmapped
	err := s.scan(ctx, true, func(item map[string]types.AttributeValue) error {
		pk, sk := sOf(item[PartitionKey]), sOf(item[SortKey])
		parts := strings.SplitN(sk, "#", 3)
		if len(parts) != 3 {
			return fmt.Errorf("unmapped counter %s/%s: sort key is not channel#field#code", pk, sk)
		}
		out = append(out, Unmapped{PropertyID: strings.TrimPrefix(pk, UnmappedPrefix), Channel: parts[0], Field: parts[1], Code: parts[2],
			Count: nOf(item["count"]), LastSeen: time.Unix(nOf(item["last_seen"]), 0).UTC()})
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].PropertyID+out[i].Channel+out[i].Code < out[j].PropertyID+out[j].Channel+out[j].Code
	})
	return out, err
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Store) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	var missing *types.ResourceNotFoundException
	if errors.As(err, &missing) {
		return fmt.Errorf("%s: connections table %q not found: run scripts/localstack.sh or deploy the stack: %w", what, s.Table, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// encode is c as its item.
func encode(c Connection, now time.Time) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		PartitionKey: str(c.PropertyID),
		SortKey:      str(c.Channel),
		"credential": str(c.Credential),
		"hotel_ref":  str(c.HotelRef),
		"disabled":   &types.AttributeValueMemberBOOL{Value: c.Disabled},
		"version":    num(c.Version),
		"updated_at": num(now.Unix()),
	}
	if len(c.Kinds) > 0 {
		l := make([]types.AttributeValue, len(c.Kinds))
		for i, k := range c.Kinds {
			l[i] = str(k)
		}
		item["kinds"] = &types.AttributeValueMemberL{Value: l}
	}
	for name, m := range map[string]map[string]string{"room_types": c.RoomTypes, "rate_plans": c.RatePlans} {
		if m == nil {
			continue
		}
		av := make(map[string]types.AttributeValue, len(m))
		for k, v := range m {
			av[k] = str(v)
		}
		item[name] = &types.AttributeValueMemberM{Value: av}
	}
	return item
}

// decode is the connection an item holds.
func decode(item map[string]types.AttributeValue) (Connection, error) {
	c := Connection{PropertyID: sOf(item[PartitionKey]), Version: versionOf(item)}
	c.Channel, c.Credential, c.HotelRef = sOf(item[SortKey]), sOf(item["credential"]), sOf(item["hotel_ref"])
	if b, ok := item["disabled"].(*types.AttributeValueMemberBOOL); ok {
		c.Disabled = b.Value
	}
	if l, ok := item["kinds"].(*types.AttributeValueMemberL); ok {
		for _, v := range l.Value {
			c.Kinds = append(c.Kinds, sOf(v))
		}
	}
	for name, dst := range map[string]*map[string]string{"room_types": &c.RoomTypes, "rate_plans": &c.RatePlans} {
		m, ok := item[name].(*types.AttributeValueMemberM)
		if !ok {
			continue
		}
		*dst = make(map[string]string, len(m.Value))
		for k, v := range m.Value {
			(*dst)[k] = sOf(v)
		}
	}
	if c.PropertyID == "" || c.Channel == "" {
		return Connection{}, fmt.Errorf("connections table: item %v is not a connection", item)
	}
	return c, nil
}

func versionOf(item map[string]types.AttributeValue) int64 { return nOf(item["version"]) }

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func sOf(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func nOf(v types.AttributeValue) int64 {
	if n, ok := v.(*types.AttributeValueMemberN); ok {
		i, _ := strconv.ParseInt(n.Value, 10, 64)
		return i
	}
	return 0
}
