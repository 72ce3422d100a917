// tsconfig.json's isolatedModules makes ts-jest transpile without type-checking
// (fast); `tsc --noEmit` (npm run build, tests/infra/check) does the type-checking.
/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.tsx?$': 'ts-jest' },
};
