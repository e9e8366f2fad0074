// A push consumer of the Go client (rocketmq-client-go v2) for tests/interop/test_go_client.py.
// By default it fails every message it is given (ConsumeRetryLater) with maxReconsumeTimes,
// printing "CALL <epoch ms> <body> <reconsumeTimes> <topic>" per call. With "orderly" it is an
// orderly consumer (WithConsumerOrder: queues locked on their master, one call at a time per
// queue) that succeeds, printing "GOT <queueId> <queueOffset> <body>", and renews its locks
// every LOCK_INTERVAL_MS (the client's 20 s unless given). It runs until SIGTERM (or
// TIMEOUT_S), when it shuts down and prints "DONE <calls>".
//
// Usage: goconsumer NAMESRV TOPIC GROUP MAX_RECONSUME TIMEOUT_S [orderly [LOCK_INTERVAL_MS]]
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

func main() {
	if len(os.Args) < 6 || len(os.Args) > 8 {
		fmt.Fprintln(os.Stderr, "usage: goconsumer NAMESRV TOPIC GROUP MAX_RECONSUME TIMEOUT_S "+
			"[orderly [LOCK_INTERVAL_MS]]")
		os.Exit(2)
	}
	orderly := len(os.Args) >= 7 && os.Args[6] == "orderly"
	lockInterval := 20 * time.Second
	if len(os.Args) == 8 {
		ms, err := strconv.Atoi(os.Args[7])
		if err != nil || ms <= 0 {
			fmt.Fprintln(os.Stderr, "LOCK_INTERVAL_MS: a positive number of milliseconds:", os.Args[7])
			os.Exit(2)
		}
		lockInterval = time.Duration(ms) * time.Millisecond
	}
	namesrv, topic, group := os.Args[1], os.Args[2], os.Args[3]
	maxReconsume, _ := strconv.Atoi(os.Args[4])
	timeout, _ := strconv.Atoi(os.Args[5])
	rlog.SetLogLevel("warn")
	c, err := rocketmq.NewPushConsumer(
		consumer.WithGroupName(group),
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{namesrv})),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithMaxReconsumeTimes(int32(maxReconsume)),
		consumer.WithConsumerOrder(orderly),
		consumer.WithRebalanceLockInterval(lockInterval),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "new consumer:", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	seen := 0
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(ctx context.Context,
		msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if orderly {
				fmt.Printf("GOT %d %d %s\n", m.Queue.QueueId, m.QueueOffset, string(m.Body))
			} else {
				fmt.Printf("CALL %d %s %d %s\n", time.Now().UnixMilli(), string(m.Body),
					m.ReconsumeTimes, m.Topic)
			}
			seen++
		}
		if orderly {
			return consumer.ConsumeSuccess, nil
		}
		return consumer.ConsumeRetryLater, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "subscribe:", err)
		os.Exit(1)
	}
	if err := c.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		os.Exit(1)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-stop:
	case <-time.After(time.Duration(timeout) * time.Second):
		fmt.Fprintln(os.Stderr, "timed out")
	}
	_ = c.Shutdown()
	mu.Lock()
	fmt.Printf("DONE %d\n", seen)
	mu.Unlock()
}
