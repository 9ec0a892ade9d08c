// Command seedbench runs the Go original's bridge engine
// (../shared/seed/stream_engine_bridge.go, copied in unmodified at build time
// by build.sh) so that mfstream can be measured against it on the same input
// and the same bridge job.
//
// The seed is a fragment of the Go tier: it uses StreamEngine, QuerySpec,
// Instant, Event, QueryHandle and liftedOps without defining them. This file
// defines them minimally, with exactly the shapes the seed relies on, plus a
// driver with two modes:
//
//	seedbench e2e    --op mul --arg 1.852 INPUT   JSON instants from INPUT → JSON events on stdout
//	seedbench engine --op mul --arg 1.852 --n N   N instants from memory → count events (no JSON)
//
// The bridge job command comes from MFAPI_FLINK_CMD (newFlinkEngine), as in
// the Go tier.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"
)

// ---- The pieces of the Go tier the seed refers to. ----

// Instant is one source record: timestamp text (carried verbatim) and value.
type Instant struct {
	T string
	V float64
}

// Event is one result, serialised as a JSON object.
type Event map[string]any

// QuerySpec is the continuous query. The seed reads Op, Arg, Agg and Pname.
type QuerySpec struct {
	Op    string
	Arg   float64
	Agg   string
	Pname string
}

// QueryHandle is what Submit returns.
type QueryHandle interface {
	Results() <-chan Event
	Status() string
	Stop() error
}

// StreamEngine is the seam the seed implements.
type StreamEngine interface {
	Name() string
	Submit(ctx context.Context, spec QuerySpec, source <-chan Instant) (QueryHandle, error)
}

// liftedOps is the operations catalogue; the seed reads info.needsArg.
var liftedOps = map[string]struct{ needsArg bool }{
	"ln": {}, "exp": {}, "log10": {}, "ceil": {}, "floor": {}, "abs": {},
	"degrees": {}, "radians": {}, "sin": {}, "cos": {}, "tan": {},
	"add": {needsArg: true}, "sub": {needsArg: true},
	"mul": {needsArg: true}, "div": {needsArg: true},
}

// ---- The driver. ----

// sourceCap is the capacity of the source channel the driver feeds. A Go
// control plane would hand the engine a modestly buffered channel; the seed
// itself bounds the in-flight records by its 1024-slot timestamp FIFO.
const sourceCap = 1024

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	op := fs.String("op", "mul", "lifted operation")
	arg := fs.Float64("arg", 1.852, "scalar argument (add, sub, mul, div)")
	pname := fs.String("pname", "value", "temporal property name put in each event")
	n := fs.Int("n", 1_000_000, "records to generate (engine mode)")
	_ = fs.Parse(os.Args[2:])
	spec := QuerySpec{Op: *op, Arg: *arg, Pname: *pname}

	switch mode {
	case "e2e":
		if fs.NArg() != 1 {
			usage()
		}
		check(runE2E(spec, fs.Arg(0)))
	case "engine":
		check(runEngine(spec, *n))
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: seedbench e2e [--op OP] [--arg X] INPUT\n       seedbench engine [--op OP] [--arg X] [--n N]")
	os.Exit(2)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "seedbench:", err)
		os.Exit(1)
	}
}

// runE2E reads JSON instant lines the way a Go control plane would
// (bufio.Scanner + encoding/json), runs them through the seed's flink engine
// and writes each event as a JSON line (encoding/json on a bufio.Writer).
func runE2E(spec QuerySpec, input string) error {
	f, err := os.Open(input)
	if err != nil {
		return err
	}
	defer f.Close()

	eng, err := newFlinkEngine()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	source := make(chan Instant, sourceCap)
	readErr := make(chan error, 1)
	go func() {
		defer close(source)
		sc := bufio.NewScanner(f)
		var rec struct {
			Datetime string  `json:"datetime"`
			Value    float64 `json:"value"`
		}
		line := 0
		for sc.Scan() {
			line++
			rec.Datetime, rec.Value = "", 0
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				readErr <- fmt.Errorf("%s:%d: %w", input, line, err)
				return
			}
			source <- Instant{T: rec.Datetime, V: rec.Value}
		}
		readErr <- sc.Err()
	}()

	h, err := eng.Submit(ctx, spec, source)
	if err != nil {
		return err
	}
	out := bufio.NewWriterSize(os.Stdout, 64*1024)
	enc := json.NewEncoder(out)
	for ev := range h.Results() {
		if err := enc.Encode(ev); err != nil {
			return err
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	// The results channel closes when the job's stdout ends, so the reader
	// has finished by now. An input error would otherwise go unnoticed: the
	// seed itself cannot report it.
	return <-readErr
}

// runEngine measures the engine alone: instants come from memory (timestamps
// precomputed, outside the timed section) and events are only counted.
func runEngine(spec QuerySpec, n int) error {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ins := make([]Instant, n)
	for i := range ins {
		ins[i] = Instant{
			T: base.Add(time.Duration(i) * time.Second).Format("2006-01-02T15:04:05.000000Z"),
			V: 1 + float64(i%100_000)/1000,
		}
	}

	eng, err := newFlinkEngine()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := time.Now()
	source := make(chan Instant, sourceCap)
	go func() {
		defer close(source)
		for _, in := range ins {
			source <- in
		}
	}()
	h, err := eng.Submit(ctx, spec, source)
	if err != nil {
		return err
	}
	count := 0
	for range h.Results() {
		count++
	}
	secs := time.Since(start).Seconds()

	fmt.Fprintf(os.Stderr, "records=%d seconds=%s rate=%.0f/s\n",
		count, strconv.FormatFloat(secs, 'f', 3, 64), float64(count)/secs)
	if count != n {
		return fmt.Errorf("%d records in, %d events out", n, count)
	}
	return nil
}
