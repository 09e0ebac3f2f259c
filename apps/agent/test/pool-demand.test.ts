// The warm pool's sizing: the peak of recent creates, its bounds, the memory budget.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Demand, fitsBudget, poolTarget } from '../src/sandboxes/pool-demand.ts'

describe('warm pool demand', () => {
  it('the peak is the most creates within any 10 s of the last two minutes', () => {
    const d = new Demand(10_000, 120_000)
    assert.equal(d.peak(0), 0)
    // a burst of 20 within 2 s, then a trickle of one every 15 s
    for (let i = 0; i < 20; i++) d.record(1_000 + i * 100)
    for (let t = 20_000; t <= 100_000; t += 15_000) d.record(t)
    assert.equal(d.peak(100_000), 20)
    // 9.9 s apart counts as one window, 10 s apart does not
    const e = new Demand(10_000, 120_000)
    e.record(0)
    e.record(9_900)
    assert.equal(e.peak(9_900), 2)
    e.record(19_900)
    assert.equal(e.peak(19_900), 2)
    // two minutes after the burst it is forgotten: the trickle's peak is 1
    assert.equal(d.peak(125_000), 1)
    assert.equal(d.peak(1_000_000), 0)
  })

  it('the target is the peak between the floor and the ceiling', () => {
    assert.equal(poolTarget(0, 2, 16), 2)
    assert.equal(poolTarget(7, 2, 16), 7)
    assert.equal(poolTarget(40, 2, 16), 16)
    assert.equal(poolTarget(5, 0, 0), 0)
  })

  it('one more pooled sandbox fits the budget by what the pooled ones hold; below the floor always', () => {
    const mib = 1024 * 1024
    const base = { budgetBytes: 1024 * mib, fallbackBytes: 128 * mib, belowFloor: false }
    assert.equal(fitsBudget({ ...base, pooled: 7, measuredBytes: [] }), true) // 8 × 128 = 1024
    assert.equal(fitsBudget({ ...base, pooled: 8, measuredBytes: [] }), false)
    assert.equal(fitsBudget({ ...base, pooled: 3, measuredBytes: [200 * mib, 300 * mib, 250 * mib] }), true) // 4 × 250
    assert.equal(fitsBudget({ ...base, pooled: 4, measuredBytes: [250 * mib] }), false)
    assert.equal(fitsBudget({ ...base, pooled: 40, measuredBytes: [250 * mib], belowFloor: true }), true)
  })
})
