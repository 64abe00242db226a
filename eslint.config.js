// The linter of `npm test` (with prettier --check for the layout): typescript-eslint's recommended
// rules, and no line longer than 120 characters anywhere, comments and strings included (prettier
// wraps code at 120 but leaves comments, strings and SQL in template literals as written).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', '.data/**', 'bench/results/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2023, sourceType: 'module' },
    rules: {
      'max-len': ['error', { code: 120, tabWidth: 2 }],
      // `{}` is how postgres.js spells "no custom types" (postgres.Sql<{}>).
      '@typescript-eslint/no-empty-object-type': ['error', { allowObjectTypes: 'always' }],
      // The validators look for control characters on purpose (NUL, C0 in names and cells).
      'no-control-regex': 'off',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
    },
  },
  {
    // A test reads response bodies as whatever JSON came back.
    files: ['test/**', 'bench/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
