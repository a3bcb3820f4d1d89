// eslint (flat config) for the app's JavaScript: `make lint` runs it over demo/static/, kame_core/serve/page/static/ and tests/js/.
'use strict';
const js = require('@eslint/js');
const globals = require('globals');

module.exports = [
  js.configs.recommended,
  {
    files: ['demo/static/**/*.js', 'kame_core/serve/page/static/**/*.js'],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: 'script',
      globals: {...globals.browser, module: 'writable'},
    },
    rules: {
      'no-var': 'off',
      eqeqeq: ['error', 'always'],
      'no-implicit-globals': 'error',
      strict: ['error', 'function'],
    },
  },
  {
    files: ['kame_core/serve/page/static/talk-worklets.js'],
    languageOptions: {globals: {...globals.audioWorklet}},
  },
  {
    files: ['tests/js/**/*.js', 'eslint.config.js'],
    languageOptions: {ecmaVersion: 2022, sourceType: 'commonjs', globals: {...globals.node}},
  },
];
