'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { add, average } = require('../src/calc');

test('add', () => {
  assert.equal(add(2, 3), 5);
});

test('average of three numbers', () => {
  assert.equal(average([1, 2, 3]), 2);
});

test('average of nothing is zero', () => {
  assert.equal(average([]), 0);
});
