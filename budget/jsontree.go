package budget

import (
	"errors"
	"math"

	"github.com/turnd/turnd/internal/rawjson"
)

// maxDepth is the deepest nesting ProjectJSON restructures, the same limit
// as encoding/json's. Deeper input falls back to text projection, which
// keeps the recursion of sizing and writing bounded.
const maxDepth = 10000

type nodeKind uint8

const (
	kindScalar nodeKind = iota // number, true, false or null
	kindString                 // a string value, which may be shortened
	kindKey                    // an object key, which is never shortened
	kindArray
	kindObject
)

// node is one value of the parsed input. Nodes are stored in pre-order and
// refer to each other only through span, so a finished subtree can be moved
// within tree.nodes without fixing anything up.
type node struct {
	kind nodeKind
	// tooBig marks an object whose members can never all fit; none of them
	// were kept.
	tooBig     bool
	start, end int // the value's bytes in the input
	size       int // bytes of the value's compact form
	span       int // nodes in the subtree, this one included
	count      int // items or members in the input
	// head and tail are the items of an array that have nodes, from its
	// start and from its end; items between them were elided while parsing
	// because no projection within the cap could keep them.
	head, tail int
	kids       int // containers: index in tree.kids of the first child
	// maxString is the longest string value (content bytes) in the subtree
	// and maxLevel the largest wholeLevel of its arrays: a plan reaching
	// both leaves the subtree whole. maxLevel is MaxInt when the subtree
	// lacks nodes for some of its input.
	maxString, maxLevel int
}

// tree is parsed JSON, holding nodes only for the parts of the input that
// some projection within the cap could keep.
type tree struct {
	raw         []byte
	nodes       []node // nodes[0] is the top-level value
	kids        []int  // children of containers; objects list key, value, key, ...
	compactSize int    // bytes of the whole input's compact form
	maxLevel    int    // the largest wholeLevel of an array with a node
	tooDeep     bool   // nesting beyond maxDepth; there are no nodes
}

// errTooManyNodes stops a parse whose tree outgrows its node budget.
var errTooManyNodes = errors.New("budget: JSON tree over its node budget")

// nodeBudget bounds the nodes of a tree, so that memory follows the cap:
// any projection within the cap keeps at most sizeCap nodes.
func (p *Projector) nodeBudget() int {
	return min(p.sizeCap, math.MaxInt/8)*4 + 4096
}

// parseJSON checks raw and builds its tree in memory bounded by the cap
// rather than the input (see ARCHITECTURE.md, "budget: JSON projection").
// Past the node budget it fails with errTooManyNodes, and the caller
// parses again with a larger zoneScale. nodes, if not nil, is storage to
// reuse from an earlier attempt.
func (p *Projector) parseJSON(raw []byte, zoneScale int, nodes []node) (*tree, error) {
	t := &tree{raw: raw, nodes: nodes[:0]}
	b := builder{
		tree:            t,
		keepsHead:       p.keepsHead(),
		keepsTail:       p.keepsTail(),
		stringFloor:     2 + p.markerSize(0),
		itemMarkerFloor: itemMarkerSize(0),
		rootAvail:       p.sizeCap,
		zoneScale:       zoneScale,
	}
	maxNodes := p.nodeBudget()
	s := rawjson.Tokenizer{Data: raw}
	for {
		tok, err := nextToken(&s)
		if err != nil {
			return nil, err
		}
		if t.tooDeep && tok.Kind != rawjson.TokenEOF {
			continue // only validating from here on
		}
		if len(t.nodes) > maxNodes {
			return t, errTooManyNodes // t only lends its storage
		}
		switch tok.Kind {
		case rawjson.TokenEOF:
			t.compactSize = s.Compact
			if !t.tooDeep {
				t.index()
			}
			return t, nil
		case rawjson.TokenKey:
			b.key(tok)
		case rawjson.TokenString, rawjson.TokenNumber, rawjson.TokenLiteral:
			b.scalar(tok)
		case rawjson.TokenBeginArray, rawjson.TokenBeginObject:
			b.open(tok, s.Compact-1)
		case rawjson.TokenEndArray, rawjson.TokenEndObject:
			b.close(tok, s.Compact)
		}
	}
}

// index lists the children of every container in tree.kids.
func (t *tree) index() {
	for i := range t.nodes {
		n := &t.nodes[i]
		var k int
		switch {
		case n.kind == kindArray:
			k = n.head + n.tail
		case n.kind == kindObject && !n.tooBig:
			k = 2 * n.count
		default:
			continue
		}
		n.kids = len(t.kids)
		for c := i + 1; k > 0; k-- {
			t.kids = append(t.kids, c)
			c += t.nodes[c].span
		}
	}
}

type builder struct {
	tree      *tree
	frames    []frame
	queue     []tailEntry // tail candidates of the open arrays, innermost last
	keepsHead bool
	keepsTail bool
	// stringFloor and itemMarkerFloor are the smallest a shortened string
	// and an item marker can be.
	stringFloor     int
	itemMarkerFloor int
	rootAvail       int
	// zoneScale divides the room of array zones beyond their first item.
	zoneScale int
}

// frame is an open container.
type frame struct {
	node   int // this container's node, or -1 when it has none
	object bool
	keep   bool // whether children get nodes
	// avail bounds the size this container can have in any projection that
	// fits the cap.
	avail   int
	compact int // Tokenizer.Compact at the opening bracket
	count   int
	// sum adds up the lower bounds of the children's projected sizes:
	// items, or members (key, ':' and value).
	sum     int
	minItem int // arrays: the smallest lower bound of an item

	// Arrays: items that fit the head zone, and the room they take with
	// their commas.
	headKept int
	headSum  int
	// Arrays past the head zone: tail candidates start at node zone; the
	// live ones are queue[queueFront:], taking tailSum with their commas.
	tailing    bool
	zone       int
	queueBase  int
	queueFront int
	tailSum    int

	// Objects: the current member's key size and the room for its value.
	keySize    int
	valueAvail int

	maxString, maxLevel int
}

type tailEntry struct {
	start int // node index of the item
	lb    int // lower bound of its projected size
}

// slot tells whether the next value gets a node, and the room it has.
func (b *builder) slot() (keep bool, avail int) {
	if len(b.frames) == 0 {
		return true, b.rootAvail
	}
	f := &b.frames[len(b.frames)-1]
	switch {
	case !f.keep:
		return false, 0
	case f.object:
		return true, f.valueAvail
	case f.tailing:
		return true, f.avail - 2
	}
	return true, f.avail - 2 - f.headSum
}

func (b *builder) scalar(tok rawjson.Token) {
	size := tok.End - tok.Start
	lb := size
	if tok.Kind == rawjson.TokenString {
		lb = min(size, b.stringFloor)
	}
	id := -1
	if keep, _ := b.slot(); keep {
		id = len(b.tree.nodes)
		n := node{kind: kindScalar, start: tok.Start, end: tok.End, size: size, span: 1}
		if tok.Kind == rawjson.TokenString {
			n.kind = kindString
			n.maxString = size - 2
		}
		b.tree.nodes = append(b.tree.nodes, n)
	}
	b.done(id, lb)
}

func (b *builder) key(tok rawjson.Token) {
	f := &b.frames[len(b.frames)-1]
	f.count++
	f.keySize = tok.End - tok.Start
	if !f.keep {
		return
	}
	b.tree.nodes = append(b.tree.nodes, node{kind: kindKey, start: tok.Start, end: tok.End, size: f.keySize, span: 1})
	f.valueAvail = f.avail - 2 - f.sum - (f.count - 1) - f.keySize - 1
}

func (b *builder) open(tok rawjson.Token, compact int) {
	if len(b.frames) >= maxDepth {
		b.tree.tooDeep = true
		b.tree.nodes, b.frames, b.queue = nil, nil, nil
		return
	}
	keep, avail := b.slot()
	kind := kindArray
	if tok.Kind == rawjson.TokenBeginObject {
		kind = kindObject
	}
	id := -1
	if keep {
		id = len(b.tree.nodes)
		b.tree.nodes = append(b.tree.nodes, node{kind: kind, start: tok.Start})
	}
	b.frames = append(b.frames, frame{
		node:       id,
		object:     kind == kindObject,
		keep:       keep,
		avail:      avail,
		compact:    compact,
		minItem:    math.MaxInt,
		tailing:    !b.keepsHead,
		zone:       id + 1,
		queueBase:  len(b.queue),
		queueFront: len(b.queue),
	})
}

func (b *builder) close(tok rawjson.Token, compact int) {
	f := b.frames[len(b.frames)-1]
	b.frames = b.frames[:len(b.frames)-1]

	// The container's own lower bound: all its members, or for an array
	// either all its items or one item and the marker.
	lb := 2 + f.sum + max(f.count-1, 0)
	if !f.object {
		if f.count > 0 {
			lb = 2 + min(f.sum+f.count-1, f.minItem+1+b.itemMarkerFloor)
		}
	}

	if f.node >= 0 {
		tail := 0
		if !f.object && f.tailing && b.keepsTail {
			live := b.liveStart(&f)
			moved := copy(b.tree.nodes[f.zone:], b.tree.nodes[live:])
			b.tree.nodes = b.tree.nodes[:f.zone+moved]
			tail = len(b.queue) - f.queueFront
		}
		n := &b.tree.nodes[f.node]
		n.end = tok.End
		n.size = compact - f.compact
		n.span = len(b.tree.nodes) - f.node
		n.count = f.count
		n.maxString = f.maxString
		n.maxLevel = f.maxLevel
		if f.object {
			// An object with a node loses keep only by being too big.
			n.tooBig = !f.keep
		} else {
			n.head, n.tail = f.headKept, tail
			n.maxLevel = max(n.maxLevel, wholeLevel(n))
			b.tree.maxLevel = max(b.tree.maxLevel, wholeLevel(n))
		}
		if elided := !f.object && n.head+n.tail < n.count; elided || n.tooBig {
			n.maxLevel = math.MaxInt
		}
	}
	b.queue = b.queue[:f.queueBase]
	b.done(f.node, lb)
}

// done takes a finished value into its container: id is its node (or -1)
// and lb the lower bound of its projected size.
func (b *builder) done(id, lb int) {
	if len(b.frames) == 0 {
		return
	}
	f := &b.frames[len(b.frames)-1]
	if f.object {
		f.sum += f.keySize + 1 + lb
		if !f.keep {
			return
		}
		if 2+f.sum+f.count-1 > f.avail {
			// No projection keeps every member, and members cannot be
			// dropped, so drop the nodes of all of them.
			b.tree.nodes = b.tree.nodes[:f.node+1]
			f.keep = false
			return
		}
		b.absorb(f, id)
		return
	}

	f.count++
	f.sum += lb
	f.minItem = min(f.minItem, lb)
	if id < 0 {
		return
	}
	b.absorb(f, id)
	zoneAvail := f.avail / b.zoneScale
	if !f.tailing {
		if need := 2 + f.headSum + lb; need <= f.avail && (f.headKept == 0 || need <= zoneAvail) {
			f.headKept++
			f.headSum += lb + 1
			return
		}
		// The head zone is full; this item is the first tail candidate.
		f.tailing = true
		f.zone = id
		if !b.keepsTail {
			b.tree.nodes = b.tree.nodes[:id]
			f.keep = false
			return
		}
	}
	b.queue = append(b.queue, tailEntry{start: id, lb: lb})
	f.tailSum += lb + 1
	// Brackets plus the candidates and the commas between them must fit;
	// the newest candidate alone needs only to fit the array's room.
	for f.queueFront < len(b.queue) &&
		(f.tailSum+1 > f.avail || f.tailSum+1 > zoneAvail && len(b.queue)-f.queueFront > 1) {
		f.tailSum -= b.queue[f.queueFront].lb + 1
		f.queueFront++
	}
	b.compactTail(f)
}

func (b *builder) absorb(f *frame, id int) {
	n := &b.tree.nodes[id]
	f.maxString = max(f.maxString, n.maxString)
	f.maxLevel = max(f.maxLevel, n.maxLevel)
}

// liveStart is the node index of the oldest live tail candidate.
func (b *builder) liveStart(f *frame) int {
	if f.queueFront < len(b.queue) {
		return b.queue[f.queueFront].start
	}
	return len(b.tree.nodes)
}

// compactTail reclaims the nodes of dropped tail candidates once they are
// at least as many as the live ones, so each node moves O(1) times on
// average.
func (b *builder) compactTail(f *frame) {
	live := b.liveStart(f)
	dead := live - f.zone
	if dead == 0 || dead < len(b.tree.nodes)-live {
		return
	}
	moved := copy(b.tree.nodes[f.zone:], b.tree.nodes[live:])
	b.tree.nodes = b.tree.nodes[:f.zone+moved]
	kept := copy(b.queue[f.queueBase:], b.queue[f.queueFront:])
	b.queue = b.queue[:f.queueBase+kept]
	for i := f.queueBase; i < len(b.queue); i++ {
		b.queue[i].start -= dead
	}
	f.queueFront = f.queueBase
}
